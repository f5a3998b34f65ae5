"""One file per kind of stream (`vlcp.run.stream.Stream`), named in `vlcp.registry.STREAMS`."""
