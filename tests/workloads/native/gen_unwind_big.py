#!/usr/bin/env python3
"""Writes the assembly of libunwind_big.so: a library the size of the ones ML
users run (thousands of functions, several MB of .eh_frame), with known call
chains through it and no frame pointers.

Every function keeps rbx on the stack and moves rsp in many small steps, each
described by its own .cfi_ directive, so the library's call frame
information is as dense as a C++ library's (libtorch_cpu: 9.9 MB of
.eh_frame for 80 MB of code). A few functions form the chains the program
runs (unwind_big.c): chain c is big_chain_c_0 -> big_chain_c_1 -> ... ->
the program's leaf, each function far from the next in the library, so a
walk crosses many pages of the table.

usage: gen_unwind_big.py OUT.S [FUNCTIONS] [CHAINS] [DEPTH]
"""

import sys


def function(out, name, steps, callee=None):
    """A function that saves rbx, then moves rsp down and back up by `steps` words, each
    step its own CFI row; with `callee`, calls it in the middle
    (its return address then lies under a CFA offset only the table knows)."""
    out.append(f"\t.globl {name}\n\t.type {name}, @function\n\t.p2align 4\n{name}:\n")
    out.append("\t.cfi_startproc\n")
    out.append("\tpushq %rbx\n\t.cfi_def_cfa_offset 16\n\t.cfi_offset %rbx, -16\n")
    offset = 16
    for _ in range(steps):
        # 8 bytes of code per row: a library's rows are tens of bytes apart.
        out.append(f"\tsubq $8, %rsp\n\t.cfi_def_cfa_offset {offset + 8}\n\tmovq %rdi, (%rsp)\n")
        offset += 8
    if callee:
        out.append(f"\tcall {callee}@PLT\n")
    else:
        out.append("\tmovq %rdi, %rbx\n")
    for _ in range(steps):
        out.append(f"\taddq $8, %rsp\n\t.cfi_def_cfa_offset {offset - 8}\n\tnop\n\tnop\n\tnop\n")
        offset -= 8
    out.append("\tpopq %rbx\n\t.cfi_def_cfa_offset 8\n\tret\n")
    out.append(f"\t.cfi_endproc\n\t.size {name}, .-{name}\n")


def main():
    path = sys.argv[1]
    functions = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    chains = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    depth = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    # Where each chain function goes among the fillers: spread over the
    # whole library.
    slots = {}
    for c in range(chains):
        for d in range(depth):
            slot = ((c * depth + d) * 7919 + 13) % functions
            while slot in slots:
                slot = (slot + 1) % functions
            slots[slot] = (c, d)
    out = ["\t.text\n"]
    for i in range(functions):
        if i in slots:
            c, d = slots[i]
            callee = f"big_chain_{c}_{d + 1}" if d + 1 < depth else "unwind_big_leaf"
            function(out, f"big_chain_{c}_{d}", 3 + d % 3, callee)
        else:
            function(out, f"big_filler_{i}", 8 + i % 24)
    out.append('\t.section .note.GNU-stack,"",@progbits\n')
    with open(path, "w") as f:
        f.write("".join(out))


if __name__ == "__main__":
    main()
