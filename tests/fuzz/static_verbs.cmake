# Linking softhca's libibverbs statically, as fuzz_net_rx and its replay
# test do (an OBJECT library of the sources, linked into the executable).
#
# The verbs that also have a libibverbs 1.0 alias are defined as
# shca_latest_<name> and bound to <name>@@IBVERBS_1.1 by the symver
# attribute (SHCA_DEFAULT_VERSION, src/verbs/shca.h).  In a static link
# the linker resolves a plain <name> to that default version, so nothing
# more is needed with a compiler that knows the attribute (GCC 10 on).
# Clang ignores it (-Wunknown-attributes): then the link defines each
# <name> as shca_latest_<name>.
#
#   shca_static_verbs(OBJLIB SOURCE...)
#	adds what OBJLIB's compilation needs, and sets
#	SHCA_STATIC_VERBS_LINK_OPTIONS for the executables that link it.
include(CheckCSourceCompiles)

function(shca_static_verbs objlib)
  set(CMAKE_REQUIRED_FLAGS -Werror)
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
  check_c_source_compiles("
void shca_v(void);
__attribute__((symver(\"shca_v@@SHCA_1\"))) void shca_v(void) {}
" SHCA_CC_HAS_SYMVER)
  set(opts)
  if(NOT SHCA_CC_HAS_SYMVER)
    target_compile_options(${objlib} PRIVATE -Wno-unknown-attributes)
    foreach(src ${ARGN})
      file(STRINGS ${src} lines REGEX "^SHCA_DEFAULT_VERSION\\(")
      foreach(line ${lines})
        string(REGEX REPLACE "^SHCA_DEFAULT_VERSION\\(([A-Za-z0-9_]+)\\).*"
                             "\\1" name "${line}")
        list(APPEND opts "-Wl,--defsym=${name}=shca_latest_${name}")
      endforeach()
    endforeach()
  endif()
  set(SHCA_STATIC_VERBS_LINK_OPTIONS ${opts} PARENT_SCOPE)
endfunction()
