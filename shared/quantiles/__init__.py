"""Federated quantile estimation (seed 001 §7; docs/methods.md §8).

=============================  ===========================================  ==================
estimator                      coordinator function (center half)           centers release
=============================  ===========================================  ==================
YJ table (one pass)            :func:`yj_table_quantiles`                   the table
interpolation with buffers     :func:`interpolation_quantiles`              the table
interpolation/extrapolation    :func:`extrapolation_quantiles`              the table
YJ data                        :func:`yj_data_quantiles` (:func:`yj_moments`)  moment sums per λ
quantile loss (LEAKS DATA)     :func:`quantile_loss_quantiles`              losses per u
                               (:func:`quantile_loss`)
ours: YJ shaped                :func:`yj_shaped_quantiles`                  the table
=============================  ===========================================  ==================

Every estimator returns a frozen :class:`QuantileResult` (the YJ ones a :class:`YJQuantileResult`
with the fitted :class:`YJNormal`). Wire models for the moment and loss exchanges are in
:mod:`shared.quantiles.wire`.
"""

from shared.quantiles._common import QuantileResult, YJQuantileResult
from shared.quantiles.loss import (
    LossQuery,
    QuantileLoss,
    in_process_loss_query,
    quantile_loss,
    quantile_loss_quantiles,
)
from shared.quantiles.shaped import fit_yj_grouped, yj_shaped_quantiles
from shared.quantiles.table import (
    extrapolation_quantiles,
    fit_yj_table,
    interpolation_quantiles,
    table_brackets,
    yj_table_quantiles,
)
from shared.quantiles.yeojohnson import YJNormal, inverse_yeojohnson, yeojohnson
from shared.quantiles.yj_data import (
    EvaluationCapError,
    MomentQuery,
    YJMoments,
    fit_yj_data,
    in_process_query,
    profile_loglik,
    yj_data_quantiles,
    yj_moments,
)

__all__ = [
    "EvaluationCapError",
    "LossQuery",
    "MomentQuery",
    "QuantileLoss",
    "QuantileResult",
    "YJMoments",
    "YJNormal",
    "YJQuantileResult",
    "extrapolation_quantiles",
    "fit_yj_data",
    "fit_yj_grouped",
    "fit_yj_table",
    "in_process_loss_query",
    "in_process_query",
    "interpolation_quantiles",
    "inverse_yeojohnson",
    "profile_loglik",
    "quantile_loss",
    "quantile_loss_quantiles",
    "table_brackets",
    "yeojohnson",
    "yj_data_quantiles",
    "yj_moments",
    "yj_shaped_quantiles",
    "yj_table_quantiles",
]
