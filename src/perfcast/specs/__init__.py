"""Typed, frozen, validated inputs: ModelSpec, GPUSpec, SystemSpec, Strategy, Workload."""

from perfcast.specs.hardware import GPUSpec, Precision, SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

__all__ = ["GPUSpec", "ModelSpec", "Precision", "Strategy", "SystemSpec", "Workload"]
