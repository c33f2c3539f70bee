# security_test_import_control: the import service attacked
# (docs/import.md "Another process's cmd_fd"): the peer socket's calls
# (shca_common: src/shm/sock.c) to connect as an importer does, and its
# own arena read as a peer does (arena_peer.c: the table of importers).
target_sources(security_test_import_control PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/arena_peer.c)
target_include_directories(security_test_import_control PRIVATE
                           ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(security_test_import_control PRIVATE shca_common)
set_tests_properties(security_test_import_control PROPERTIES TIMEOUT 300
                     ENVIRONMENT "TEST_TIMEOUT=120")
