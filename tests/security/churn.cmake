# test_churn.c (the arena after churn) opens softhca_lo with the verbs
# tests' helper, and finds its own arena as a peer does (arena_peer.c).
target_sources(security_test_churn PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/arena_peer.c)
# ... and reads the arena's layout (src/shm/arena.h) to play a peer that
# rewrites an offset there.
target_include_directories(security_test_churn PRIVATE
                           ${PROJECT_SOURCE_DIR}/src)
