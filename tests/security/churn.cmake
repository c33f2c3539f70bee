# test_churn.c (the arena after churn) opens softhca_lo with the verbs
# tests' helper.
target_sources(security_test_churn PRIVATE
               ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c)
