# security_test_hostile_arena: a responder that forges its own arena
# (memory windows, XRC), with the traffic tests' endpoints and XRC setup,
# the arena's structs (src/shm/arena.h) and its key index's own hash
# (src/shm/mrkey.c: the words it forges are where the library looks).
target_sources(security_test_hostile_arena PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/xrc_ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/arena_peer.c
               ${PROJECT_SOURCE_DIR}/src/shm/mrkey.c)
target_include_directories(security_test_hostile_arena PRIVATE
                           ${CMAKE_CURRENT_SOURCE_DIR}/../traffic
                           ${PROJECT_SOURCE_DIR}/src)
