# security_test_hostile_arena: a responder that forges its own arena
# (memory windows, XRC), with the traffic tests' endpoints and XRC setup
# and the arena's structs (src/shm/arena.h).
target_sources(security_test_hostile_arena PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/xrc_ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c)
target_include_directories(security_test_hostile_arena PRIVATE
                           ${CMAKE_CURRENT_SOURCE_DIR}/../traffic
                           ${PROJECT_SOURCE_DIR}/src)
