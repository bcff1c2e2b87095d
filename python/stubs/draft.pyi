# (src/bind_draft.cpp)
