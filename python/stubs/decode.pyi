# (src/bind_decode.cpp)
