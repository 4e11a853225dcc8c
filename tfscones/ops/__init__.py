"""Differentiable ops with exact gradients that the heads build on.

`tfscones.ops.entmax`: sparsemax, entmax-1.5 and α-entmax by bisection, as functions and layers.
"""
