# test_churn.c (the arena after churn) opens softhca_lo with the verbs
# tests' helper.
target_sources(security_test_churn PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c)
# ... and reads the arena's layout (src/shm/arena.h) to play a peer that
# rewrites an offset there.
target_include_directories(security_test_churn PRIVATE
                           ${PROJECT_SOURCE_DIR}/src)
