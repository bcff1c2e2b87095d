# (src/bind_tree.cpp)
