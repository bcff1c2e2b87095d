# Joins the per-area stub files (python/stubs/*.pyi, written beside each src/bind_*.cpp) into the
# package's single _specdec.pyi. Run as: cmake -DOUT=... -DIN="a|b|..." -P concatenate.cmake
file(WRITE ${OUT} "# Type stubs of specdec._specdec, joined from python/stubs/ at build time.\n")
string(REPLACE "|" ";" parts "${IN}")
foreach(part ${parts})
  file(READ ${part} text)
  file(APPEND ${OUT} "\n${text}")
endforeach()
