"""The scientist's state machine.

seed -> select -> research -> approve -> experiment x N (in parallel, via Send) -> measured
    -> explain x N (in parallel: each explanation sees every sibling measured) -> collect -> select ...
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from graph import approval, nodes
from graph.context import RunContext
from graph.state import RunState


def build_graph() -> StateGraph:
    graph = StateGraph(RunState, context_schema=RunContext)
    graph.add_node("seed", nodes.seed)
    graph.add_node("select", nodes.select)
    graph.add_node("research", nodes.research)
    graph.add_node("experiment", nodes.experiment)
    graph.add_node("measured", nodes.measured)
    graph.add_node("explain", nodes.explain)
    graph.add_node("collect", nodes.collect)
    graph.add_node("approve", approval.approve)
    graph.add_edge(START, "seed")
    graph.add_conditional_edges("seed", nodes.after_seed, {"select": "select", "end": END})
    graph.add_edge("select", "research")
    graph.add_edge("research", "approve")
    graph.add_conditional_edges("approve", nodes.fan_out, ["experiment", "collect"])
    graph.add_edge("experiment", "measured")
    graph.add_conditional_edges("measured", nodes.fan_out_explain, ["explain", "collect"])
    graph.add_edge("explain", "collect")
    graph.add_conditional_edges("collect", nodes.after_collect, {"select": "select", "end": END})
    return graph
