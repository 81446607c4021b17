"""``python -m loom run``: one command from a model file to a step trained on N ranks.

Usage (from the repository root)::

    PYTHONPATH=python python -m loom run FILE.py --nproc N [--dp none|replicate|fsdp] \\
        [--steps K] [--check [--rtol R] [--atol A]] [--out DIR] [--make-arg KEY=VALUE ...] [--seed S] \\
        [--microbatches M] [--optimizer sgd|adam|adamw|rmsprop|adagrad|adadelta|adamax|radam|nadam|rprop|asgd --lr X ...] [--no-cache] \\
        [--measure-workspace] [--measure-op-times] [--reference MODE] \\
        [loom-compile options, e.g. --reshard-after-forward=false --schedule]

It runs the four stages a user would otherwise type one by one, each on the
previous one's files in DIR (default ``out/<model file stem>``):

``capture``
    ``python -m loom.capture FILE.py --split N`` (``N / P`` with ``--pp=P``:
    the pipeline's ranks train the same batch) with the seed, steps,
    microbatches, ``--make-arg`` and optimizer options: ``step.pt2`` (which
    carries the run configuration, ``run.json``), the batches and PyTorch
    eager's reference.
``import``
    ``loom-import step.pt2``: ``step.mlir`` and its weights.
``compile``
    ``loom-compile step.mlir --dp=...`` plus every option this command does
    not know itself (passed through unchanged; write them as
    ``--name=value``): ``step.loomx``. World size, microbatches and
    optimizer come from the run configuration, not from this command.
``train``
    ``loom-run step.loomx --steps K --seed S [--check reference.json [--rtol R] [--atol A]]``
    on the world size the artifact records (the eager reference's seed: a
    model with dropout draws the same random numbers).

``--check`` compares with PyTorch eager on one device (the whole batch at
once), or with ``--reference ddp|fsdp|hsdp|replicate`` with PyTorch's own data
parallelism run on ``--nproc`` Gloo ranks (``loom.capture --reference``, with
the compile's ``--replicate-size``, ``--reshard-after-forward``, and
``--param-dtype``/``--reduce-dtype`` as fully_shard's MixedPrecisionPolicy): the fair
reference where the distributed step differs from one device's by design
(batch norm's statistics of each rank's rows, which each rank's check compares
with that rank's; a loss that is not a mean over the batch) or by the order of
its sums (Adam and AdamW, docs/distributed.md).

With ``--measure-workspace`` two stages come before ``compile``:
``profile-compile`` compiles the step with the same options but without a
recompute budget or a memory limit (``plain.loomx``), ``profile`` runs it for
one step with ``loom-run --kernel-workspace workspace.json``, and ``compile``
then passes
``--kernel-workspace=workspace.json``: the peak-memory analysis counts the
workspace oneDNN's convolutions and bf16 matmuls take on this machine, so a
``--recompute-budget`` bounds the measured peak of such steps too
(docs/recompute.md, "Kernel workspace"). ``--measure-op-times`` takes the
same two stages (``profile`` then runs 3 steps with ``loom-run --trace
profile.trace.json``) and ``compile`` passes ``--op-times=profile.trace.json``:
the recompute budget's and the scheduler's cost model price each op by its
time measured here (docs/simulator.md, "Measured op times"); it needs
``--recompute-budget`` or ``--schedule``. The two flags combine into one
profile run.

Each stage is cached by content: its key hashes its input files, its options
and the tool that runs it (the binary, and libloomrt for ``train``; for
capture, the model file and the Python files next to it, Loom's Python
package and the torch version). A stage
whose key matches its last successful run prints ``[stage] cached`` and is
skipped (``train`` replays the output it printed then); ``--no-cache`` runs
every stage. The first stage that fails stops the command: its output is
shown and the error names the stage, with exit status 1.

The tools are taken from ``build/bin`` and ``build/runtime/bin`` of this
repository, or of ``$LOOM_BUILD`` when set.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from loom import options
from loom.options import REFERENCE_MODES

PROG = "loom run"
REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = ".loom-cache"


# loom-compile options the profile's compile leaves out: what would make it
# fail or change nothing the kernels see (a budget, a memory limit).
UNPROFILED_FLAGS = ("--recompute-", "--memory-limit", "--op-times")
# loom-compile options that change what the step computes but that capture's
# reference cannot take, so a check against it would compare different
# training: what to do instead.
UNREFERENCED_FLAGS = {
    "--param-groups": "define param_groups(model) in the model file: capture records the "
                      "groups, the reference trains with them and loom-compile takes them",
    "--gradient-divide-factor": "the reference divides by the data-parallel size",
}

class StageError(Exception):
    """A stage failed; the message names it and says why."""


def build_dir() -> Path:
    return Path(os.environ.get("LOOM_BUILD") or REPO / "build")


def tool(stage: str, relative: str) -> Path:
    path = build_dir() / relative
    if not path.is_file():
        raise StageError(f"[{stage}] {path} not found: run `make build` (or set LOOM_BUILD to "
                         "the build directory)")
    return path


# --------------------------------------------------------------------------
# Content keys


def _hash_file(h: "hashlib._Hash", path: Path) -> None:
    h.update(str(path.name).encode() + b"\0")
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    h.update(b"\0")


def content_key(stage: str, files: Sequence[Path], options: Sequence[str]) -> str:
    h = hashlib.sha256(stage.encode() + b"\0")
    for path in files:
        _hash_file(h, path)
    h.update(json.dumps(list(options)).encode())
    return h.hexdigest()


def model_sources(model: Path) -> list[Path]:
    """The model file and the Python files beside it, which it may import:
    a change to any of them can change what capture exports."""
    siblings = sorted(p for p in model.parent.glob("*.py") if p != model)
    return [model, *siblings]


def capture_tool_files() -> list[Path]:
    package = Path(options.__file__).resolve().parent
    return sorted(package.glob("*.py"))


# --------------------------------------------------------------------------
# Stages


@dataclass
class Stage:
    name: str
    command: list[str]
    inputs: list[Path]
    outputs: list[Path]
    # Extra key material (tool versions) that is not a file.
    salt: list[str] = field(default_factory=list)
    # Replay the stage's output when it is cached (the training log).
    replay: bool = False
    env: dict[str, str] | None = None


def _record(out: Path, stage: str) -> Path:
    return out / CACHE_DIR / f"{stage}.json"


def _log(out: Path, stage: str) -> Path:
    return out / CACHE_DIR / f"{stage}.log"


def _error_line(output: str) -> str:
    """The line of a tool's output that says what went wrong."""
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    for line in lines:
        if "error" in line.lower() or "FAIL" in line:
            return line
    return lines[-1] if lines else "(no output)"


def run_stage(stage: Stage, out: Path, use_cache: bool) -> None:
    missing = [p for p in stage.inputs if not p.is_file()]
    if missing:
        raise StageError(f"[{stage.name}] missing input {missing[0]}")
    key = content_key(stage.name, stage.inputs, [*stage.command[1:], *stage.salt])
    record = _record(out, stage.name)
    if use_cache and record.is_file() and all(p.is_file() for p in stage.outputs):
        try:
            cached = json.loads(record.read_text()).get("key")
        except json.JSONDecodeError:
            cached = None
        if cached == key:
            print(f"[{stage.name}] cached", flush=True)
            if stage.replay and _log(out, stage.name).is_file():
                sys.stdout.write(_log(out, stage.name).read_text())
                sys.stdout.flush()
            return

    record.parent.mkdir(parents=True, exist_ok=True)
    record.unlink(missing_ok=True)  # a failed run must not leave a valid record
    print(f"[{stage.name}] {' '.join(stage.command)}", flush=True)
    try:
        proc = subprocess.Popen(stage.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=stage.env)
    except OSError as exc:
        raise StageError(f"[{stage.name}] cannot start {stage.command[0]}: {exc}") from exc
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()
    status = proc.wait()
    output = "".join(lines)
    _log(out, stage.name).write_text(output)
    if status != 0:
        raise StageError(f"[{stage.name}] {Path(stage.command[0]).name} exited with status "
                         f"{status}: {_error_line(output)}")
    absent = [p for p in stage.outputs if not p.is_file()]
    if absent:
        raise StageError(f"[{stage.name}] did not write {absent[0]}")
    record.write_text(json.dumps({"key": key, "command": stage.command}, indent=2) + "\n")


# --------------------------------------------------------------------------
# Driver


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0], allow_abbrev=False,
        epilog="Any other option is passed to loom-compile (see `loom-compile --help`).")
    parser.add_argument("file", type=Path, help="Python file defining make() -> (model, batches)")
    parser.add_argument("--nproc", type=int, default=1, metavar="N",
                        help="ranks to train on (default 1): N data-parallel ranks (capture "
                             "--split N), or with loom-compile's --pp=P, P pipeline ranks "
                             "times N / P data-parallel ones")
    parser.add_argument("--dp", choices=("none", "replicate", "fsdp"),
                        help="data parallelism (loom-compile --dp; default loom-compile's)")
    parser.add_argument("--steps", type=int, default=20,
                        help="steps of the eager reference and of training (default 20)")
    parser.add_argument("--check", action="store_true",
                        help="compare every loss and the final parameters with the reference's")
    parser.add_argument("--rtol", type=float, metavar="R",
                        help="--check's relative tolerance (loom-run's; default 1e-5; 0 with "
                             "--atol 0: bitwise)")
    parser.add_argument("--atol", type=float, metavar="A",
                        help="--check's absolute tolerance (loom-run's)")
    parser.add_argument("--reference", choices=("eager", *REFERENCE_MODES), default="eager",
                        help="what --check compares with: PyTorch eager on one device "
                             "(default), or PyTorch's own data parallelism run the same way "
                             "on --nproc Gloo ranks (loom.capture --reference; the fair "
                             "reference with Adam/AdamW, batch norm, or a loss that is not "
                             "a mean over the batch)")
    parser.add_argument("--out", type=Path, help="working directory (default out/<FILE stem>)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed before make()")
    parser.add_argument("--microbatches", type=int, default=1, metavar="M",
                        help="gradient-accumulation microbatches per rank (default 1)")
    parser.add_argument("--batch-dims", type=options.batch_dims_arg, metavar="D[,D...]",
                        help="the samples' dim of each batch tensor (capture --batch-dims; "
                             "default 0, 1 for sequence-first tensors, none for a tensor "
                             "every rank takes whole)")
    parser.add_argument("--make-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="pass KEY=VALUE to make(); repeatable")
    parser.add_argument("--no-cache", action="store_true", help="run every stage again")
    parser.add_argument("--measure-workspace", action="store_true",
                        help="measure the kernels' workspace on a run of the step without a "
                             "recompute budget first, and compile with it (loom-compile "
                             "--kernel-workspace)")
    parser.add_argument("--measure-op-times", action="store_true",
                        help="trace a run of the step without a recompute budget first, and "
                             "price ops by its measured times (loom-compile --op-times; needs "
                             "--recompute-budget or --schedule)")
    options.add_optimizer_arguments(parser)
    options.add_schedule_arguments(parser)
    options.add_clip_arguments(parser)
    args, compile_args = parser.parse_known_args(argv)
    if args.measure_op_times and all(compile_option(compile_args, flag) is None
                                     for flag in ("--recompute-budget", "--schedule")):
        parser.error("--measure-op-times needs --recompute-budget or --schedule (the passes "
                     "that price ops)")
    for name in ("nproc", "steps", "microbatches"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.check:
        for flag, instead in UNREFERENCED_FLAGS.items():
            if compile_option(compile_args, flag) is not None:
                parser.error(f"{flag} changes the compiled step but not the reference --check "
                             f"compares with; {instead}")
    stray = [a for a in compile_args if not a.startswith("-")]
    if stray:
        parser.error(f"unexpected argument '{stray[0]}' (loom-compile options are passed as "
                     "--name=value)")
    args.pp = pipeline_ranks(compile_args)
    if args.nproc % args.pp:
        parser.error(f"--nproc {args.nproc} is not a multiple of --pp={args.pp} (the ranks are "
                     "the pipeline's times the data-parallel ones)")
    args.dp_ranks = args.nproc // args.pp
    # Capture resolves what is not given from torch.optim's defaults (and
    # checks what needs them); this process does not import torch.
    args.optimizer_config = options.optimizer_config(parser, args, resolve=False)
    args.lr_schedule = options.schedule_config(parser, args)
    args.clip = options.clip_config(parser, args)
    for name in ("rtol", "atol"):
        value = getattr(args, name)
        if value is not None and not (value >= 0 and math.isfinite(value)):
            parser.error(f"--{name} must be a finite number at least 0")
        if value is not None and not args.check:
            parser.error(f"--{name} is --check's tolerance; add --check")
    if args.reference != "eager" and args.dp_ranks < 2:
        parser.error(f"--reference {args.reference} needs data-parallel ranks: --nproc N with "
                     "N > 1" + (f" (N / {args.pp} > 1 with --pp={args.pp})" if args.pp > 1 else ""))
    if args.out is None:
        args.out = Path("out") / args.file.stem
    return args, compile_args


def compile_option(compile_args: list[str], flag: str) -> str | None:
    """The value of loom-compile's ``--NAME=VALUE`` (``flag`` is ``--NAME``)
    among ``compile_args``: "" for a bare ``--NAME``, None when absent. LLVM
    reads ``-NAME`` the same way."""
    for arg in compile_args:
        name, _, value = arg.partition("=")
        if name in (flag, flag[1:]):
            return value
    return None


def pipeline_ranks(compile_args: list[str]) -> int:
    """The pipeline-parallel ranks loom-compile is asked for (``--pp=P``; 1
    without, or for 0 and 1, which loom-compile reads as no pipelining). A
    value that is not a number is left to loom-compile's own error."""
    try:
        return max(int(compile_option(compile_args, "--pp") or 1), 1)
    except ValueError:
        return 1


def capture_options(args: argparse.Namespace, compile_args: list[str]) -> list[str]:
    """The capture flags of everything this command was asked (a data-parallel
    reference shards as `compile_args` do)."""
    flags = ["--steps", str(args.steps), "--split", str(args.dp_ranks), "--microbatches",
             str(args.microbatches), "--seed", str(args.seed)]
    for item in args.make_arg:
        flags += ["--make-arg", item]
    if args.batch_dims:
        flags += ["--batch-dims", ",".join("none" if d is None else str(d)
                                           for d in args.batch_dims)]
    opt = args.optimizer_config
    flags += ["--optimizer", opt["name"]]
    # Every given hyperparameter, by its capture flag (capture resolves the
    # rest from torch.optim's defaults and records them all in run.json).
    for key in options.OPTIMIZER_KEYS[opt["name"]]:
        if key not in opt:
            continue
        flag, value = options.OPTIMIZER_FLAGS[key], opt[key]
        if isinstance(value, bool):
            flags += [flag] if value else []
        elif isinstance(value, list):
            flags += [flag, *map(repr, value)]
        else:
            flags += [flag, repr(value)]
    if opt.get("impl") == "fused":
        flags += ["--optimizer-impl", "fused"]
    # The schedule the reference trains with; loom-compile takes it from
    # run.json.
    if args.lr_schedule:
        for key, value in args.lr_schedule.items():
            text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
            flags += [f"--lr-{key.replace('_', '-')}", text]
    # Clipping too, which the reference applies before each update.
    if args.clip:
        flags += ["--max-grad-norm", repr(args.clip["max_norm"]), "--grad-norm-type",
                  args.clip["norm_type"]]
    if args.reference != "eager":
        flags += ["--reference", args.reference]
        # The reference's sharding follows the compile's.
        for name in ("--replicate-size", "--reshard-after-forward", "--param-dtype",
                     "--reduce-dtype"):
            value = compile_option(compile_args, name)
            flags += [name, value] if value else []
        # DDP's buffer broadcast, a flag of loom-compile's (bare: true).
        broadcast = compile_option(compile_args, "--broadcast-buffers")
        if broadcast is not None and args.reference == "ddp":
            flags += ["--broadcast-buffers", broadcast or "true"]
        hook = compile_option(compile_args, "--comm-hook")
        if hook and args.reference == "ddp":
            flags += ["--comm-hook", hook]
    return flags


def torch_version() -> str:
    """The installed torch's version, capture's key (the torch that exports
    and trains the reference), read from its package metadata: this process
    does not import torch."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # a torch on PYTHONPATH, not installed
        import torch

        return torch.__version__


def stages(args: argparse.Namespace, compile_args: list[str]) -> list[Stage]:
    out = args.out
    model = args.file.resolve()
    env = dict(os.environ)
    package_root = str(Path(options.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    capture_stage = Stage(
        "capture",
        [sys.executable, "-m", "loom.capture", str(model), "--out", str(out),
         *capture_options(args, compile_args)],
        inputs=[*model_sources(model), *capture_tool_files()],
        outputs=[out / n for n in ("step.pt2", options.RUN_CONFIG_FILE, "batches.safetensors",
                                   "reference.json", "reference.safetensors")],
        salt=[torch_version()],
        env=env)

    importer = tool("import", "bin/loom-import")
    import_stage = Stage(
        "import", [str(importer), str(out / "step.pt2"), "-o", str(out / "step.mlir")],
        inputs=[importer, out / "step.pt2"],
        outputs=[out / "step.mlir", out / "step.weights.safetensors"])

    compiler = tool("compile", "bin/loom-compile")
    runner = tool("train", "runtime/bin/loom-run")
    # loom-run is a thin tool over libloomrt, where the runtime's code lives.
    runtime_libraries = sorted((build_dir() / "runtime" / "lib").glob("libloomrt*.so*"))
    dp = [f"--dp={args.dp}"] if args.dp else []
    step_inputs = [compiler, out / "step.mlir", out / "step.weights.safetensors",
                   out / options.RUN_CONFIG_FILE]
    profile_stages = []
    if args.measure_workspace or args.measure_op_times:
        plain = [a for a in compile_args if not a.startswith(UNPROFILED_FLAGS)]
        profile_stages.append(Stage(
            "profile-compile",
            [str(compiler), str(out / "step.mlir"), "-o", str(out / "plain.loomx"), *dp, *plain],
            inputs=list(step_inputs),
            outputs=[out / "plain.loomx"]))
        # What the profile run measures, and what compile then reads.
        measured, flags, produced = [], [], []
        if args.measure_workspace:
            measured += ["--kernel-workspace", str(out / "workspace.json")]
            flags.append(f"--kernel-workspace={out / 'workspace.json'}")
            produced.append(out / "workspace.json")
        if args.measure_op_times:
            # The first traced step is a warm-up the op times leave out.
            measured += ["--trace", str(out / "profile.trace.json")]
            flags.append(f"--op-times={out / 'profile.trace.json'}")
            produced.append(out / "profile.trace.json")
        steps = "3" if args.measure_op_times else "1"
        profile_stages.append(Stage(
            "profile",
            [str(runner), str(out / "plain.loomx"), "--batches", str(out / "batches.safetensors"),
             "--steps", steps, "--seed", str(args.seed), "--no-progress", *measured],
            inputs=[runner, *runtime_libraries, out / "plain.loomx", out / "batches.safetensors"],
            outputs=produced))
        compile_args = [*compile_args, *flags]
        step_inputs += produced
    compile_stage = Stage(
        "compile",
        [str(compiler), str(out / "step.mlir"), "-o", str(out / "step.loomx"), *dp,
         *compile_args],
        inputs=step_inputs,
        outputs=[out / "step.loomx"])

    check = ["--check", str(out / "reference.json")] if args.check else []
    for name in ("rtol", "atol"):
        if getattr(args, name) is not None:
            check += [f"--{name}", repr(getattr(args, name))]
    train_stage = Stage(
        "train",
        [str(runner), str(out / "step.loomx"), "--batches",
         str(out / "batches.safetensors"), "--steps", str(args.steps), "--seed", str(args.seed),
         *check, "--no-progress"],
        inputs=[runner, *runtime_libraries, out / "step.loomx", out / "batches.safetensors",
                *([out / "reference.json", out / "reference.safetensors"] if args.check else [])],
        outputs=[],
        replay=True)
    return [capture_stage, import_stage, *profile_stages, compile_stage, train_stage]


def check_hint(args: argparse.Namespace, compile_args: list[str], error: str) -> str:
    """What to try when a check against eager fails on a step that need not
    match one device's whole batch: data parallelism, and microbatches
    (gradient accumulation, pipelining)."""
    if not (error.startswith("[train]") and "FAIL" in error and args.check):
        return ""
    if args.reference == "ddp" and args.dp_ranks > 2:
        return (
            "PyTorch DDP reduces its first step's gradients as one bucket in parameter order and "
            "rebuilds its buckets in the order gradients become ready only from the second step; "
            "the compiled step has the rebuilt layout from the first. On more than 2 Gloo ranks "
            "an element's sum order depends on its offset in the bucket, so a few gradient "
            "elements differ in the last bit, which Adam/AdamW magnify where a gradient is "
            "mathematically zero (an attention key bias): compare with --reference fsdp, or "
            "loosen --rtol/--atol (docs/distributed.md)")
    microbatches = args.microbatches
    if args.reference != "eager" and microbatches & (microbatches - 1):
        return (
            f"the compiled step divides the {microbatches} microbatches' summed gradients by "
            f"{microbatches} before reducing them over the ranks, the reference after; for a "
            "count that is not a power of two the two round apart in the last bit, which "
            "Adam/AdamW magnify where a gradient is mathematically zero (an attention key bias): "
            "loosen --rtol/--atol, or use a power-of-two --microbatches (docs/distributed.md)")
    if args.reference != "eager":
        return ""
    hints = []
    if args.dp_ranks > 1:
        hints.append(
            "the check compared with PyTorch eager on one device, which a data-parallel step "
            "need not match: with Adam/AdamW, batch norm or a loss that is not a mean over the "
            "batch, compare with PyTorch's own run (--reference ddp|fsdp|hsdp); a sequence-first "
            "model (inputs (S, B, ...)) needs --batch-dims 1, or ranks split its sequences")
    if args.pp > 1 or args.microbatches > 1:
        hints.append(
            "a step run in microbatches (--microbatches, --pp) sums their gradients in another "
            "order than eager's whole batch, which Adam/AdamW magnify where a gradient is "
            "mathematically zero, and a loss averaged within each microbatch (ignore_index, "
            "masks) is not the whole batch's mean; pipelining equals the same step's gradient "
            "accumulation bit for bit (docs/pipeline.md)")
    return "; ".join(hints)


def reference_label(out: Path) -> str:
    """What the check compared with: the ``"reference"`` a data-parallel
    reference records in reference.json, else PyTorch eager."""
    report = json.loads((out / "reference.json").read_text())
    return report.get("reference", "PyTorch eager on one device")


def main(argv: Sequence[str] | None = None) -> int:
    args, compile_args = parse_args(argv)
    if not args.file.is_file():
        print(f"{PROG}: error: model file not found: {args.file}", file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"{PROG}: error: --out {args.out} exists and is not a directory", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for stage in stages(args, compile_args):
            run_stage(stage, args.out, use_cache=not args.no_cache)
    except StageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        hint = check_hint(args, compile_args, str(exc))
        if hint:
            print(f"{PROG}: note: {hint}", file=sys.stderr)
        return 1
    print(f"{PROG}: {args.file} trained {args.steps} steps on {args.nproc} "
          f"rank{'s' if args.nproc > 1 else ''}" + (f" at parity with {reference_label(args.out)}"
                                                    if args.check else "") + f"; files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
