"""Serving deployment search (``perfcast infer-search``): aggregated and disaggregated
deployments under TTFT/TPOT targets, screened in bulk and re-scored by ``estimate_serving``."""

from perfcast.serving_search.exact import DeploymentResult, Targets
from perfcast.serving_search.run import InferSearchResult, search_deployments
from perfcast.serving_search.space import Deployment, InstanceLayout

__all__ = ["Deployment", "DeploymentResult", "InferSearchResult", "InstanceLayout", "Targets",
           "search_deployments"]
