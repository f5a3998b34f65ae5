"""vlcp: vision-language continual pretraining, reproducibly.

Submodules are imported on use (`vlcp.data`, `vlcp.models`, `vlcp.methods`, `vlcp.train`,
`vlcp.eval`, `vlcp.report`) so that `import vlcp` stays cheap.
"""
__version__ = "0.1.0"
