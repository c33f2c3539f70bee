# cq_thread (tests/security/cq_thread.c): the completion-thread pattern of
# the classic rdma_cm samples, run 500 times by test_cq_thread.sh.
add_executable(cq_thread ${CMAKE_CURRENT_SOURCE_DIR}/cq_thread.c)
target_link_libraries(cq_thread PRIVATE ibverbs rdmacm Threads::Threads)
set_target_properties(cq_thread PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  BUILD_RPATH "${CMAKE_BINARY_DIR}/lib")
