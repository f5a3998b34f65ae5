"""vlcp: vision-language continual pretraining, reproducibly.

Submodules are imported on use (`vlcp.data`, `vlcp.models`, `vlcp.methods`, `vlcp.train`,
`vlcp.eval`, `vlcp.report`) so that `import vlcp` stays cheap.
"""
import time as _time

__version__ = "0.1.0"
IMPORTED_AT = _time.time()   # when this process imported vlcp: the end of its start-up (vlcp.run.timing)
