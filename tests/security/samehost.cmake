# tests/security/test_samehost.sh and test_port_exhaust.c (issue 11, "Same
# host"): the victim's pair and probe (plain verbs), and the impostor
# (softhca's headers for the hello and arena layouts, shca_common for the
# private directory of root, which it may enter as the test's own user).
add_executable(samehost_pair ${CMAKE_CURRENT_SOURCE_DIR}/samehost_pair.c)
target_link_libraries(samehost_pair PRIVATE ibverbs)
set_target_properties(samehost_pair PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
  BUILD_RPATH "${CMAKE_BINARY_DIR}/lib")

add_executable(samehost_impostor ${CMAKE_CURRENT_SOURCE_DIR}/samehost_impostor.c)
target_include_directories(samehost_impostor PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(samehost_impostor PRIVATE shca_common Threads::Threads)
set_target_properties(samehost_impostor PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

add_dependencies(samehost_pair softhca)
# both hold every port of a range of their own (29100 and 26000, below the
# ephemeral ports): one at a time, so that neither starves the other
set_tests_properties(security_test_samehost security_test_port_exhaust
  PROPERTIES RESOURCE_LOCK softhca_port_ranges)

# the private directory and its keyed hash, on their own
add_executable(security_samehost_rundir
               ${CMAKE_CURRENT_SOURCE_DIR}/samehost_rundir.c)
target_include_directories(security_samehost_rundir PRIVATE
                           ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(security_samehost_rundir PRIVATE shca_harness
                      shca_common Threads::Threads)
set_target_properties(security_samehost_rundir PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME security_samehost_rundir COMMAND security_samehost_rundir)
set_tests_properties(security_samehost_rundir PROPERTIES LABELS security
                     TIMEOUT 60 SKIP_RETURN_CODE 77)
