# security_test_xrc_control: ibv_open_qp's control channel attacked
# (docs/xrc.md "Opened QPs"): the traffic tests' endpoints and XRC setup,
# the peer socket's calls (shca_common: src/shm/sock.c) to connect as an
# opener does, and the domain's id read from src/verbs/shca.h.
target_sources(security_test_xrc_control PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/xrc_ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c)
target_include_directories(security_test_xrc_control PRIVATE
                           ${CMAKE_CURRENT_SOURCE_DIR}/../traffic
                           ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(security_test_xrc_control PRIVATE shca_common)
set_tests_properties(security_test_xrc_control PROPERTIES TIMEOUT 600
                     ENVIRONMENT "TEST_TIMEOUT=120")
