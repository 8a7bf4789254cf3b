"""A flow file with a syntax error (for the error screen)."""

from flowtui import agent, workflow


@workflow(steps=[]
class Broken:
    pass
