// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The in-kernel CPython walk: for a sample of a process the daemon has marked
 * as CPython, find the sampled thread's PyThreadState, note whether it holds
 * the GIL, and record its frames (code object, instruction offset, stamp)
 * after the native stacks of the sample, offering each code object it reads
 * to the code copies. See pystrobe_abi.h for the walk, step by step, and for
 * who fills the offsets.
 *
 * Every read of the target's memory can fail (the process may be exiting or
 * corrupt); a failed read ends the walk with the frames so far, counted.
 * A read costs about 30 ns however few bytes it takes, several times the
 * rest of a frame's work, so reads are few and wide: a thread state's head
 * comes in one read, a frame with the frames below it in one block
 * (frame_in_block), and a code object's head is read once per walk however
 * often it recurs (code_stamp), with fields picked out of the copies.
 *
 * Here: walk_python_stack, the global function every sampling program calls
 * (python_stack.bpf.h), the frame walk's steps, and the definitions of the
 * walk's maps and knob. The thread-state search is in
 * python_thread_state.bpf.h, the per-CPU state in python_walk.bpf.h.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"
#include "python_code_copy.bpf.h"
#include "python_process.bpf.h"
#include "python_stack.bpf.h"
#include "python_thread_state.bpf.h"
#include "python_walk.bpf.h"
#include "sample_stages.bpf.h"

/* Set by the loader (--max-python-depth): frames walked per sample. */
const volatile __u32 python_max_frames = 128;

struct python_thread_states_map python_thread_states SEC(".maps");
struct python_walk_scratch_map python_walk_scratch SEC(".maps");

/* The thread's innermost frame, by the version's frame model, from the
 * head of its thread state. */
static __always_inline bool top_frame(struct python_walk *walk, __u64 *frame)
{
	const struct pystrobe_python_offsets *off = &walk->proc.offsets;
	__u64 cframe;

	if (off->frame_model == PYSTROBE_PY_FRAMES_CFRAME) {
		cframe = thread_state_u64(walk, off->tstate_frame);
		if (cframe == 0) {
			*frame = 0;
			return true;
		}
		return read_target_u64(cframe, off->cframe_current_frame, frame);
	}
	*frame = thread_state_u64(walk, off->tstate_frame);
	return true;
}

enum code_lookup {
	CODE_READ,	 /* its stamp is in the walk's cache now */
	CODE_NOT_CODE,	 /* 3.13's f_executable may hold something else: skip the frame */
	CODE_UNREADABLE, /* the walk ends */
};

/* The slot of the walk's stamp cache that code object `code` goes in. */
static __always_inline struct python_stamp_slot *stamp_slot(struct python_walk *walk, __u64 code)
{
	return &walk->stamps[(code >> 4) & (PYTHON_STAMP_SLOTS - 1)];
}

/*
 * A code object met first in this walk: its head read, its stamp and
 * co_tlbc (0 where the build has none) put in its slot of the walk's
 * cache, and a copy offered to userspace (python_code_copy.bpf.h).
 *
 * A global function, verified once on its own: inlined into each frame of
 * a walk step, it multiplied the verifier's work (a second of CPU at each
 * start) for a path that most frames of a sample do not take.
 */
__noinline int python_code_met_first(struct python_walk *walk, struct pystrobe_sample *sample,
				     struct code_copy_progress *copies, __u64 code)
{
	const struct pystrobe_python_offsets *off;
	struct python_stamp_slot *slot;

	if (!walk || !sample || !copies)
		return CODE_UNREADABLE;
	off = &walk->proc.offsets;
	if (bpf_probe_read_user(walk->code_copy, walk->code_copy_size & (PYTHON_COPY_SIZE - 1),
				(void *)code))
		return CODE_UNREADABLE;
	if (copied_u64(walk->code_copy, off->object_type) != walk->proc.code_type_addr)
		return CODE_NOT_CODE;
	slot = stamp_slot(walk, code);
	slot->code = code;
	slot->walk_id = walk->walk_id;
	slot->stamp = pystrobe_python_code_stamp32(
	    pystrobe_python_code_stamp(copied_u64(walk->code_copy, off->code_filename),
				       copied_u64(walk->code_copy, off->code_name),
				       copied_u32(walk->code_copy, off->code_firstlineno)));
	slot->tlbc = off->code_tlbc == PYSTROBE_PY_OFFSET_NONE
			 ? 0
			 : copied_u64(walk->code_copy, off->code_tlbc);
	offer_code_copy(copies, sample->pid, code, slot->stamp, sample->time_ns, &walk->proc);
	return CODE_READ;
}

/* How far below the frame read last a frame object may start and still be
 * taken for the next of a packed chain (see frame_in_block). */
#define PYTHON_PACKED_FRAME_GAP 1024

/*
 * The frame at `frame` in walk->frame_block, read in unless a read for an
 * earlier frame brought it: returns its index in the block, or -1 when it
 * cannot be read.
 *
 * A read costs more than the rest of a frame's work, and 3.11+ pushes a
 * thread's frames side by side onto its data stack, each above the one
 * that called it. So a read takes the frame and up to block_span bytes
 * below it, stopping at the frame's page: the pages below it in its chunk
 * were written when the frames under it were pushed, but the page below a
 * chunk may not be mapped and a faulting read costs twenty good ones.
 *
 * Frame objects before 3.11 are each on the heap, where their function was
 * first called; but calls made in a row (recursion, a fresh call chain)
 * take them in a row from one pool, each below its callee. So when this
 * frame starts just below the frame read last, the read takes the rest of
 * its page below it too, as on the data stack; otherwise the frame alone.
 */
static __always_inline long frame_in_block(struct python_walk *walk, __u64 frame)
{
	__u64 at = frame - walk->block_addr, span = walk->block_span, end, start, page, size;

	/* One comparison: a frame below the block wraps around to a huge at. */
	if (at <= walk->block_last)
		return at;
	if (frame < walk->block_addr && walk->block_addr - frame <= PYTHON_PACKED_FRAME_GAP)
		span = PYTHON_FRAME_BLOCK;
	end = frame + walk->frame_copy_size;
	start = end - span;
	page = frame & ~(__u64)(PYTHON_PAGE_SIZE - 1);
	if (start < page || start > frame)
		start = page;
	size = end - start;
	if (size > PYTHON_FRAME_BLOCK)
		return -1;
	if (bpf_probe_read_user(walk->frame_block, size, (void *)start))
		return -1;
	walk->block_addr = start;
	walk->block_last = size - walk->frame_copy_size;
	return frame - start;
}

/* A field of the frame at index `at` of the block; in bounds by
 * construction, masked for the verifier. */
static __always_inline __u64 block_u64(const struct python_walk *walk, __u64 at, __u32 offset)
{
	return *(const __u64 *)(walk->frame_block + ((at + offset) & (PYTHON_FRAME_BLOCK - 8)));
}

static __always_inline __u32 block_u32(const struct python_walk *walk, __u64 at, __u32 offset)
{
	return *(const __u32 *)(walk->frame_block + ((at + offset) & (PYTHON_FRAME_BLOCK - 4)));
}

static __always_inline __u8 block_u8(const struct python_walk *walk, __u64 at, __u32 offset)
{
	return walk->frame_block[(at + offset) & (PYTHON_FRAME_BLOCK - 1)];
}

/*
 * Where the bytecode a 3.11+ frame runs starts: co_code_adaptive, or on a
 * free-threaded build the thread's own copy of it (tlbc_index > 0), found
 * in the code object's _PyCodeArray { Py_ssize_t size; char *entries[]; }.
 * 0 when that copy cannot be read.
 */
static __always_inline __u64 bytecode_base(struct python_walk *walk, __u64 at, __u64 code,
					   __u64 tlbc)
{
	const struct pystrobe_python_offsets *off = &walk->proc.offsets;
	__s32 index;
	__u64 base;

	if (off->frame_tlbc_index == PYSTROBE_PY_OFFSET_NONE)
		return code + off->code_code_adaptive;
	index = (__s32)block_u32(walk, at, off->frame_tlbc_index);
	if (index <= 0)
		return code + off->code_code_adaptive;
	if (tlbc == 0 || !read_target_u64(tlbc, 8 + 8 * (__u32)index, &base))
		return 0;
	return base;
}

/*
 * What the frame walk works on: bpf_loop hands its callback a pointer to
 * the caller's stack, and the map values ride along in it. The frame to
 * visit and the code object of the frame before are kept here rather than
 * in the map value, so that a step's frames pass them in registers. (Not
 * the count of frames written: the verifier follows a count kept here
 * value by value, frame by frame, past its limit.)
 */
struct python_walk_ctx {
	struct python_walk *walk;
	struct pystrobe_sample *sample;
	__u64 cursor;	 /* the next frame, 0 past the outermost */
	__u64 last_code; /* the code object of the frame recorded last, or 0 */
	__u64 last_tlbc;
	__u32 last_stamp;
	struct code_copy_progress copies;
};

enum frame_step {
	FRAME_RECORDED,
	FRAME_SKIPPED, /* a shim or a frame that runs no code object */
	FRAME_WALK_ENDS,
};

/*
 * The stamp and co_tlbc of `code`, the code object of a frame about to be
 * recorded: the frame before's when it ran the same one (recursion, and
 * every frame of a loop's callee), else from the walk's cache, else read
 * (and offered to the code copies). FRAME_RECORDED when found.
 */
static __always_inline enum frame_step frame_code_stamp(struct python_walk_ctx *walk_ctx,
							__u64 code, __u32 *stamp, __u64 *tlbc)
{
	struct python_walk *walk = walk_ctx->walk;
	struct python_stamp_slot *slot;

	if (code == 0) {
		walk->status = PYSTROBE_PY_READ_FAILED;
		return FRAME_WALK_ENDS;
	}
	if (code == walk_ctx->last_code) {
		*stamp = walk_ctx->last_stamp;
		*tlbc = walk_ctx->last_tlbc;
		return FRAME_RECORDED;
	}
	/* While the sampled thread is stopped, its frames keep their code
	 * objects alive: an address names one code object for the walk. */
	slot = stamp_slot(walk, code);
	if (slot->code != code || slot->walk_id != walk->walk_id) {
		switch (python_code_met_first(walk, walk_ctx->sample, &walk_ctx->copies, code)) {
		case CODE_READ:
			break;
		case CODE_NOT_CODE:
			return FRAME_SKIPPED;
		default:
			walk->status = PYSTROBE_PY_READ_FAILED;
			return FRAME_WALK_ENDS;
		}
	}
	*stamp = slot->stamp;
	*tlbc = slot->tlbc;
	walk_ctx->last_code = code;
	walk_ctx->last_stamp = *stamp;
	walk_ctx->last_tlbc = *tlbc;
	return FRAME_RECORDED;
}

/* One frame: find its copy, skip shims and non-code frames, record the
 * rest, and offer a code object met first to the code copies. */
static __always_inline enum frame_step walk_frame(struct python_walk_ctx *walk_ctx)
{
	struct python_walk *walk = walk_ctx->walk;
	struct pystrobe_sample *sample = walk_ctx->sample;
	const struct pystrobe_python_offsets *off = &walk->proc.offsets;
	__u64 frame = walk_ctx->cursor, code, tlbc, base;
	__u32 slot, stamp;
	__s64 offset, at;
	enum frame_step step;

	if (frame == 0)
		return FRAME_WALK_ENDS;
	at = frame_in_block(walk, frame);
	if (at < 0) {
		walk->status = PYSTROBE_PY_READ_FAILED;
		return FRAME_WALK_ENDS;
	}
	walk_ctx->cursor = block_u64(walk, at, off->frame_previous);
	if (pystrobe_python_is_shim_frame(block_u8(walk, at, off->frame_owner), off)) {
		/* An interpreter shim frame (3.12+): nothing of the program's,
		 * but the frame above it was the first of an eval loop's call. */
		if (walk->frames > 0) {
			slot = walk->base + 2 * (walk->frames - 1);
			sample->data[slot & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] |=
			    PYSTROBE_PY_FRAME_ENTRY;
		}
		return FRAME_SKIPPED;
	}

	code = pystrobe_python_frame_code(block_u64(walk, at, off->frame_code), off);
	step = frame_code_stamp(walk_ctx, code, &stamp, &tlbc);
	if (step != FRAME_RECORDED)
		return step;

	switch (off->frame_model) {
	case PYSTROBE_PY_FRAMES_CFRAME:
	case PYSTROBE_PY_FRAMES_CURRENT_FRAME:
		base = bytecode_base(walk, at, code, tlbc);
		offset = base == 0 ? -1 : (__s64)(block_u64(walk, at, off->frame_instr) - base);
		/* 3.11 says which frame began an eval loop's call. */
		if (off->frame_is_entry != PYSTROBE_PY_OWNER_NONE &&
		    block_u8(walk, at, off->frame_is_entry))
			code |= PYSTROBE_PY_FRAME_ENTRY;
		break;
	case PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS:
		offset = (__s64)(__s32)block_u32(walk, at, off->frame_instr) * 2;
		code |= PYSTROBE_PY_FRAME_ENTRY; /* each frame its own eval loop call */
		break;
	default:
		offset = (__s32)block_u32(walk, at, off->frame_instr);
		code |= PYSTROBE_PY_FRAME_ENTRY;
		break;
	}
	if (offset > 0x7fffffff || offset < -0x7fffffff)
		offset = -1;

	slot = walk->base + 2 * walk->frames;
	sample->data[slot & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] = code;
	sample->data[(slot + 1) & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] =
	    (__u64)stamp | ((__u64)(__u32)(__s32)offset << 32);
	walk->frames++;
	return walk->frames >= walk->max_frames ? FRAME_WALK_ENDS : FRAME_RECORDED;
}

/*
 * Frames visited per call of the bpf_loop callback. A call and its return
 * cost about a quarter of a 3.11+ frame's work on a host whose CPU guards
 * returns (AMD's Safe RET: 12 of 54 ns), so a call walks several frames;
 * more than a few only multiplies what the verifier explores.
 */
#define PYTHON_FRAMES_PER_STEP 8

static long walk_frames_step(__u32 index, void *ctx)
{
	for (int i = 0; i < PYTHON_FRAMES_PER_STEP; i++)
		if (walk_frame(ctx) == FRAME_WALK_ENDS)
			return 1;
	return 0;
}

/*
 * How many bytes the walk copies of a frame, of a code object and of a
 * thread state's head: just past the last field it uses of each, from the
 * process's offsets; 0 when a field lies beyond what a copy holds. Global
 * functions, each verified once on its own: inlined, their branches
 * multiplied the paths through the walk past the verifier's limit.
 */
__noinline int python_frame_copy_size(const struct pystrobe_python_offsets *off)
{
	__u16 size;

	if (!off || !offset_fits_copy(off->frame_previous) || !offset_fits_copy(off->frame_code) ||
	    !offset_fits_copy(off->frame_instr) || !offset_fits_copy(off->frame_owner) ||
	    !offset_fits_copy(off->frame_tlbc_index))
		return 0;
	size = copy_size_covering(0, off->frame_previous, 8);
	size = copy_size_covering(size, off->frame_code, 8);
	size = copy_size_covering(size, off->frame_instr, 8);
	size = copy_size_covering(size, off->frame_owner, 1);
	size = copy_size_covering(size, off->frame_tlbc_index, 4);
	if (off->frame_is_entry != PYSTROBE_PY_OWNER_NONE)
		size = copy_size_covering(size, off->frame_is_entry, 1);
	return (size + 7) & ~7;
}

__noinline int python_code_copy_size(const struct pystrobe_python_offsets *off)
{
	__u16 size;

	if (!off || !offset_fits_copy(off->object_type) || !offset_fits_copy(off->code_filename) ||
	    !offset_fits_copy(off->code_name) || !offset_fits_copy(off->code_firstlineno) ||
	    !offset_fits_copy(off->code_tlbc))
		return 0;
	size = copy_size_covering(0, off->object_type, 8);
	size = copy_size_covering(size, off->code_filename, 8);
	size = copy_size_covering(size, off->code_name, 8);
	size = copy_size_covering(size, off->code_firstlineno, 4);
	return copy_size_covering(size, off->code_tlbc, 8);
}

__noinline int python_tstate_head_size(const struct pystrobe_python_offsets *off)
{
	__u16 size;

	if (!off || !offset_fits_copy(off->tstate_thread_id) ||
	    !offset_fits_copy(off->tstate_status) || !offset_fits_copy(off->tstate_interp) ||
	    !offset_fits_copy(off->tstate_frame))
		return 0;
	size = copy_size_covering(0, off->tstate_thread_id, 8);
	size = copy_size_covering(size, off->tstate_status, 4);
	size = copy_size_covering(size, off->tstate_interp, 8);
	return copy_size_covering(size, off->tstate_frame, 8);
}

/* Declared, and its contract given, in python_stack.bpf.h. */
__noinline int walk_python_stack(struct pystrobe_sample *sample, __u32 base)
{
	struct task_struct *thread = bpf_get_current_task_btf();
	struct python_walk *walk;
	const struct pystrobe_python_offsets *off;
	struct python_walk_ctx walk_ctx;
	__u64 frame, interp;

	if (!sample)
		return 0;
	sample->python_frames = 0;
	sample->python_status = PYSTROBE_PY_READ_FAILED;
	walk = python_walk_state();
	if (!walk || !walk->proc_is_python || walk->proc_tgid != sample->pid)
		return 0;
	off = &walk->proc.offsets;
	if (walk->frame_copy_size == 0 || walk->code_copy_size == 0 || walk->tstate_head_size == 0)
		return 0;
	walk->block_addr = 0;
	walk->block_last = 0; /* no frame: a frame's address is never 0 */

	walk->walk_id++;
	walk->pthread_self = thread->thread.fsbase;
	sample_stage_done(SAMPLE_STAGE_WALK_SETUP);
	find_thread_state(walk, thread);
	sample_stage_done(SAMPLE_STAGE_THREAD_STATE);
	if (walk->tstate == 0) {
		sample->python_status = PYSTROBE_PY_NO_THREAD_STATE;
		return 0;
	}
	if (off->free_threaded)
		sample->flags |= PYSTROBE_SAMPLE_FREE_THREADED;
	/* 3.12+: the thread state's own interpreter (0 before: the GIL is the
	 * process's), its GIL and its id. */
	interp = off->tstate_interp == PYSTROBE_PY_OFFSET_NONE
		     ? 0
		     : thread_state_u64(walk, off->tstate_interp);
	if (interp && off->interp_id != PYSTROBE_PY_OFFSET_NONE)
		read_target_u64(interp, off->interp_id, &sample->interpreter_id);
	if (holds_gil(walk, interp))
		sample->flags |= PYSTROBE_SAMPLE_HOLDS_GIL;
	sample_stage_done(SAMPLE_STAGE_INTERPRETER);

	walk->status = PYSTROBE_PY_WALKED;
	walk->frames = 0;
	walk->base = base;
	/* A native stack deeper than PYSTROBE_MAX_NATIVE_FRAMES (the table
	 * walker's) leaves fewer words for Python frames. */
	walk->max_frames = python_max_frames;
	if (base > PYSTROBE_SAMPLE_DATA_WORDS)
		return 0;
	if (walk->max_frames > (PYSTROBE_SAMPLE_DATA_WORDS - base) / 2)
		walk->max_frames = (PYSTROBE_SAMPLE_DATA_WORDS - base) / 2;
	if (!top_frame(walk, &frame)) {
		sample->python_status = PYSTROBE_PY_READ_FAILED;
		return 0;
	}
	walk_ctx.walk = walk;
	walk_ctx.sample = sample;
	walk_ctx.cursor = frame;
	walk_ctx.last_code = 0;
	walk_ctx.last_tlbc = 0;
	walk_ctx.last_stamp = 0;
	walk_ctx.copies.sent = 0;
	walk_ctx.copies.stopped = false;
	sample_stage_done(SAMPLE_STAGE_TOP_FRAME);
	bpf_loop((walk->max_frames + PYTHON_FRAMES_PER_STEP - 1) / PYTHON_FRAMES_PER_STEP,
		 walk_frames_step, &walk_ctx, 0);
	sample_stage_done(SAMPLE_STAGE_FRAMES);
	if (walk->status == PYSTROBE_PY_WALKED && walk_ctx.cursor != 0)
		sample->flags |= PYSTROBE_SAMPLE_PY_TRUNCATED;
	sample->python_frames = walk->frames;
	sample->python_status = walk->status;
	return 0;
}
