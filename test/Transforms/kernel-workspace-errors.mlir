// A kernel workspace profile that loom-kernel-workspace cannot use is an
// error naming the file and what is wrong, never a crash or a silently
// empty profile.
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: kernel workspace profile '{{.*}}missing.json': cannot read it: {{.*}}
// RUN: not loom-opt %s --loom-kernel-workspace 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: kernel workspace profile '': no file given (file=...)
// RUN: printf '{"format": "loom-kernel-workspace", "kernels": {' > %t.syntax.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.syntax.json 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: error: kernel workspace profile '{{.*}}syntax.json': not JSON: {{.*}}
// RUN: printf '{"format": "loomx", "kernels": {}}' > %t.format.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.format.json 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: error: kernel workspace profile '{{.*}}format.json': not a profile of loom-run --kernel-workspace ("format" is not "loom-kernel-workspace")
// RUN: printf '{"format": "loom-kernel-workspace", "device": "cuda", "kernels": {}}' > %t.cuda.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.cuda.json 2>&1 | FileCheck %s --check-prefix=CUDA
// CUDA: error: kernel workspace profile '{{.*}}cuda.json': measured on 'cuda'; only the CPU runtime measures kernel workspace
// RUN: printf '{"format": "loom-kernel-workspace", "kernels": []}' > %t.list.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.list.json 2>&1 | FileCheck %s --check-prefix=LIST
// LIST: error: kernel workspace profile '{{.*}}list.json': "kernels" must be an object from kernel signature to bytes
// RUN: printf '{"format": "loom-kernel-workspace", "kernels": {"aten::mm.default(f32[2,2],f32[2,2])->(f32[2,2])": -4}}' > %t.negative.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.negative.json 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: kernel workspace profile '{{.*}}negative.json': kernels["aten::mm.default(f32[2,2],f32[2,2])->(f32[2,2])"] must be a non-negative integer
// RUN: printf '{"format": "loom-kernel-workspace", "kernels": {"aten::mm.default(f32[2,2],f32[2,2])->(f32[2,2])": 1.5}}' > %t.float.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.float.json 2>&1 | FileCheck %s --check-prefix=FLOAT
// FLOAT: error: kernel workspace profile '{{.*}}float.json': kernels["aten::mm.default(f32[2,2],f32[2,2])->(f32[2,2])"] must be a non-negative integer
// RUN: printf '{"format": "loom-kernel-workspace", "threads": 0, "kernels": {}}' > %t.threads.json
// RUN: not loom-opt %s --loom-kernel-workspace=file=%t.threads.json 2>&1 | FileCheck %s --check-prefix=THREADS
// THREADS: error: kernel workspace profile '{{.*}}threads.json': "threads" must be a positive integer
// The same from loom-compile:
// RUN: not loom-compile %s --kernel-workspace=%t.cuda.json -o %t.loomx 2>&1 | FileCheck %s --check-prefix=CUDA

module {
}
