# Lit configuration of the Loom test suite.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "LOOM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%loom_src", config.loom_src_root))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tools = ["loom-opt", "loom-import", "loom-compile", "loom-sac", "loom-pp-schedule"]
llvm_config.add_tool_substitutions(tools, [config.loom_tools_dir])

# Python for helper scripts (mutating archives) needs only the standard
# library; capture tests need torch from the project's virtualenv.
config.substitutions.append(("%python", config.python_executable))
if config.loom_python and os.path.exists(config.loom_python):
    config.available_features.add("torch")
    config.substitutions.append(("%torch_python", config.loom_python))
    config.environment["PYTHONPATH"] = os.path.join(config.loom_src_root,
                                                    "python")
