# The legitimate RC pair of test_netauth.sh (net admission, issue 11):
# built against the system's verbs headers, run on softhca's libibverbs
# through LD_LIBRARY_PATH like any client.
add_executable(netauth_peer ${CMAKE_CURRENT_LIST_DIR}/netauth_peer.c)
target_link_libraries(netauth_peer PRIVATE ibverbs)
set_target_properties(netauth_peer PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  BUILD_RPATH "${CMAKE_BINARY_DIR}/lib")
