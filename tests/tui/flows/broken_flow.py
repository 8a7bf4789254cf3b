"""A flow file with a syntax error (for the error screen)."""

from runtime import agent, workflow


@workflow(steps=[]
class Broken:
    pass
