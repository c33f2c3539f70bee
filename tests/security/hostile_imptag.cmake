# security_test_hostile_imptag: forged bounce tags in an importer's CQ
# (docs/import.md "Bounce buffers"), with the import tests' endpoints and
# the arena's structs (src/shm/arena.h: where the forged words go).
target_sources(security_test_hostile_imptag PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/import_ep.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/arena_peer.c)
target_include_directories(security_test_hostile_imptag PRIVATE
                           ${CMAKE_CURRENT_SOURCE_DIR}/../traffic
                           ${PROJECT_SOURCE_DIR}/src)
