# (src/bind_verify.cpp)
