# security_flood (flood.c): connection floods against a victim with a live
# RC pair, on the same-host path and the net path; the flooder reads the
# victim's counters with `softhca stat`.
shca_c_test(security_flood security ${CMAKE_CURRENT_SOURCE_DIR}/flood.c
            ${CMAKE_CURRENT_SOURCE_DIR}/fdcount.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../traffic/ep.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../verbs/common.c)
target_include_directories(security_flood PRIVATE
                           ${CMAKE_CURRENT_SOURCE_DIR}/../traffic
                           ${CMAKE_CURRENT_SOURCE_DIR}/../verbs)
target_compile_definitions(security_flood PRIVATE
                           SOFTHCA_TOOL="$<TARGET_FILE:softhca>")
add_dependencies(security_flood softhca)
set_tests_properties(security_flood PROPERTIES TIMEOUT 240
                     ENVIRONMENT "TEST_TIMEOUT=100")
# the counters' place in the arena (shm/arena.h), read while the victim's
# listener cannot answer `softhca stat`
target_include_directories(security_flood PRIVATE ${CMAKE_SOURCE_DIR}/src)

# security_flood_cm (flood_cm.c): the same against an rdma_cm listener,
# whose accept4 calls strace counts while it is out of descriptors.
shca_c_test(security_flood_cm security
            ${CMAKE_CURRENT_SOURCE_DIR}/flood_cm.c
            ${CMAKE_CURRENT_SOURCE_DIR}/fdcount.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../cm/cm_common.c)
target_include_directories(security_flood_cm PRIVATE
                           ${CMAKE_CURRENT_SOURCE_DIR}/../cm)
target_link_libraries(security_flood_cm PRIVATE rdmacm)
set_tests_properties(security_flood_cm PROPERTIES TIMEOUT 120
                     SKIP_RETURN_CODE 77)
