# lit configuration for ember's IR tests: textual IR in, FileCheck out.
import os
import lit.formats

config.name = "ember-ir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.ember_test_exec_root
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
# ember-opt, FileCheck and not come first on PATH.
config.environment["PATH"] = os.pathsep.join(
    [config.ember_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
