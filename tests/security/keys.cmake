# Extras of the key tests (issue 11, docs/security.md "Keys").
#
# security_test_keys: the key quality and brute-force cases, with the
# traffic tests' helpers and the softhca tool (it reads the counters).
target_sources(security_test_keys PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/ep.c)
target_compile_definitions(security_test_keys PRIVATE
                           SOFTHCA_TOOL="$<TARGET_FILE:softhca>")
add_dependencies(security_test_keys softhca)

# security_keys_whitebox: the key generator (verbs/mr_keys.c, with a
# quarantine of 16 keys and the test's own random source) and the arena's
# key index (shm/mrkey.c) read from hostile bytes.
add_executable(security_keys_whitebox
               ${CMAKE_CURRENT_SOURCE_DIR}/keys_whitebox.c
               ${PROJECT_SOURCE_DIR}/src/verbs/mr_keys.c)
target_include_directories(security_keys_whitebox PRIVATE
                           ${PROJECT_SOURCE_DIR}/src/verbs
                           ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(security_keys_whitebox PRIVATE
                           SHCA_MR_KEY_QUARANTINE=16u
                           shca_random_u32=shca_test_random_u32)
target_link_libraries(security_keys_whitebox PRIVATE shca_harness
                      shca_engine Threads::Threads)
set_target_properties(security_keys_whitebox PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
add_test(NAME security_keys_whitebox COMMAND security_keys_whitebox)
set_tests_properties(security_keys_whitebox PROPERTIES LABELS security
                     TIMEOUT 120 SKIP_RETURN_CODE 77)
