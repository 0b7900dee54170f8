# Builds BPF C into an object with clang and turns it into a libbpf skeleton
# header with bpftool, so the BPF bytecode is embedded in the binary.

find_program(BPF_CLANG NAMES clang REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

set(VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH
    "Kernel BTF that vmlinux.h is generated from")

# vmlinux.h is generated from the running kernel's BTF (see README: design).
function(pystrobe_generate_vmlinux_h out_dir)
  if(NOT EXISTS "${VMLINUX_BTF}")
    message(FATAL_ERROR "No kernel BTF at ${VMLINUX_BTF}: pystrobe needs a kernel "
                        "built with CONFIG_DEBUG_INFO_BTF=y (or set VMLINUX_BTF)")
  endif()
  add_custom_command(
    OUTPUT "${out_dir}/vmlinux.h"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${out_dir}"
    COMMAND ${BPFTOOL} btf dump file "${VMLINUX_BTF}" format c > "${out_dir}/vmlinux.h"
    COMMENT "Generating vmlinux.h from ${VMLINUX_BTF}"
    VERBATIM)
endfunction()

# How every BPF source is compiled (and each header alone, below).
set(PYSTROBE_BPF_CFLAGS -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror)

# pystrobe_add_bpf_header_tests(HEADERS <x.bpf.h>... [INCLUDE_DIRS dirs...])
# One test per header, named bpf_header_<name>: the header compiles on its own,
# as the first thing a BPF source includes, with the flags of the real build.
# A header that leans on what its includer happened to define fails here.
# Needs vmlinux.h, which building pystrobe generates.
function(pystrobe_add_bpf_header_tests)
  cmake_parse_arguments(ARG "" "" "HEADERS;INCLUDE_DIRS" ${ARGN})
  set(include_flags "-I${CMAKE_BINARY_DIR}/bpf")
  foreach(dir ${ARG_INCLUDE_DIRS})
    list(APPEND include_flags "-I${dir}")
  endforeach()
  foreach(header_file ${ARG_HEADERS})
    get_filename_component(header "${header_file}" ABSOLUTE BASE_DIR "${CMAKE_SOURCE_DIR}")
    get_filename_component(name "${header_file}" NAME)
    string(REGEX REPLACE "(\\.bpf)?\\.h$" "" name "${name}")
    add_test(NAME bpf_header_${name}
             COMMAND ${BPF_CLANG} ${PYSTROBE_BPF_CFLAGS} ${include_flags} -fsyntax-only
                     -include "${header}" -x c /dev/null)
    set_tests_properties(bpf_header_${name} PROPERTIES LABELS unit)
  endforeach()
endfunction()

# pystrobe_add_bpf_skeleton(TARGET <target> SOURCES <a.bpf.c>... NAME <skel name>
#                           [INCLUDE_DIRS dirs...])
# Compiles each source, links the objects into one BPF object (bpftool gen
# object) and defines an INTERFACE library <target> whose include path holds
# <NAME>.skel.h. An object is rebuilt when any header it includes changes
# (clang depfile).
function(pystrobe_add_bpf_skeleton)
  cmake_parse_arguments(ARG "" "TARGET;NAME" "SOURCES;INCLUDE_DIRS" ${ARGN})
  set(out_dir "${CMAKE_BINARY_DIR}/bpf")
  set(linked "${out_dir}/${ARG_NAME}.linked.bpf.o")
  set(skeleton "${out_dir}/${ARG_NAME}.skel.h")
  set(include_flags "-I${out_dir}")
  foreach(dir ${ARG_INCLUDE_DIRS})
    list(APPEND include_flags "-I${dir}")
  endforeach()

  set(objects "")
  foreach(source_file ${ARG_SOURCES})
    get_filename_component(source "${source_file}" ABSOLUTE)
    get_filename_component(stem "${source_file}" NAME_WE)
    set(object "${out_dir}/${stem}.bpf.o")
    add_custom_command(
      OUTPUT "${object}"
      COMMAND ${BPF_CLANG} ${PYSTROBE_BPF_CFLAGS}
              ${include_flags} -MD -MF "${object}.d" -c "${source}" -o "${object}"
      DEPENDS "${source}" "${out_dir}/vmlinux.h"
      DEPFILE "${object}.d"
      COMMENT "Compiling BPF ${source_file}"
      VERBATIM)
    list(APPEND objects "${object}")
  endforeach()

  add_custom_command(
    OUTPUT "${skeleton}"
    COMMAND ${BPFTOOL} gen object "${linked}" ${objects}
    COMMAND ${BPFTOOL} gen skeleton "${linked}" name "${ARG_NAME}" > "${skeleton}"
    DEPENDS ${objects}
    COMMENT "Generating BPF skeleton ${ARG_NAME}.skel.h"
    VERBATIM)
  add_custom_target(${ARG_TARGET}_gen DEPENDS "${skeleton}")
  add_library(${ARG_TARGET} INTERFACE)
  add_dependencies(${ARG_TARGET} ${ARG_TARGET}_gen)
  target_include_directories(${ARG_TARGET} INTERFACE "${out_dir}")
endfunction()
