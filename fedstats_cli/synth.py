"""Synthetic hospitals for the demo and the compose deployment (never real patients).

Each hospital has two treatment arms (``control``, ``treated``) of its own sizes and a skewed
outcome, the length of stay in days: log-normal with a hospital-specific median (case mix) and a
shorter stay under treatment (median × ``TREATMENT_EFFECT``), rounded to 0.1 day (so ties occur,
as in real records). Age is a second numeric column and smoking (never, former, current) a
categorical one, both independent of the arm, as a real extract would have; the K-anonymous demo
leaves them unused, the DP demo's Table 1 describes them.

A time to readmission (``days_to_readmission``, whole days, with ``readmitted`` 1 for a
readmission, 0 for censored) is a time-to-event variable: exponential with a hospital-specific
90-day readmission risk, a lower hazard under treatment (hazard ratio ``READMISSION_HR``),
censored by loss to follow-up (uniform over the follow-up) and administratively at the end of
the hospital's follow-up (``follow_up_days``: 90 days at most, earlier at some hospitals, whose
registries close sooner). Drawn after every other column, so those are what the same seed gave
before it was added.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATASET = "cohort"
VARIABLE = "los_days"
GROUP_COLUMN = "arm"
LEVELS = ("control", "treated")
#: Public bounds on the length of stay for DP releases (days).
BOUNDS = (0.0, 60.0)
TREATMENT_EFFECT = 0.85
DEFAULT_SEED = 20261129
#: The categorical column: its public categories (in the order adjacent ones are merged) and the
#: share of each (the same in every hospital and arm).
SMOKING = "smoking"
SMOKING_LEVELS = ("never", "former", "current")
SMOKING_SHARES = (0.5, 0.3, 0.2)
#: The time-to-event variable: its name, its time and event columns, the hazard ratio of
#: readmission under treatment and the longest follow-up (days).
READMISSION = "readmission"
READMISSION_TIME = "days_to_readmission"
READMISSION_EVENT = "readmitted"
READMISSION_HR = 0.7
FOLLOW_UP_DAYS = 90
#: The share of patients lost to follow-up before its end (uniformly over it).
LOST_SHARE = 0.1


@dataclass(frozen=True)
class Hospital:
    center_id: str
    n_control: int
    n_treated: int
    median_days: float
    sigma: float
    readmission_risk: float = 0.25
    """The control arm's probability of readmission within 90 days (without censoring)."""
    follow_up_days: int = FOLLOW_UP_DAYS
    """Administrative censoring: the hospital follows its patients up this long (public)."""


HOSPITALS = (
    Hospital("hospital_a", 537, 498, 5.5, 0.60, readmission_risk=0.25, follow_up_days=90),
    Hospital("hospital_b", 311, 268, 4.6, 0.55, readmission_risk=0.20, follow_up_days=60),
    Hospital("hospital_c", 152, 167, 6.2, 0.70, readmission_risk=0.30, follow_up_days=75),
)


def hospital(center_id: str) -> Hospital:
    for h in HOSPITALS:
        if h.center_id == center_id:
            return h
    known = ", ".join(h.center_id for h in HOSPITALS)
    raise ValueError(f"`hospital` must be one of {{{known}}}, not {center_id!r}")


def generate(h: Hospital, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Columns ``arm``, ``los_days``, ``age``, ``smoking``, ``days_to_readmission`` and
    ``readmitted`` of one hospital, rows in random order."""
    arm = np.repeat(np.array(LEVELS), [h.n_control, h.n_treated])
    median = np.where(arm == LEVELS[1], h.median_days * TREATMENT_EFFECT, h.median_days)
    los = np.round(median * np.exp(rng.normal(0.0, h.sigma, arm.size)), 1)
    los = np.clip(los, 0.1, None)
    age = np.clip(np.round(rng.normal(64.0, 14.0, arm.size)), 18, 99).astype(int)
    order = rng.permutation(arm.size)
    # Drawn last, so the other columns are those of the same seed before smoking was added.
    smoking = rng.choice(np.array(SMOKING_LEVELS), size=arm.size, p=SMOKING_SHARES)
    time, event = readmission(h, arm[order], rng)  # after smoking, for the same reason
    return {GROUP_COLUMN: arm[order], VARIABLE: los[order], "age": age[order],
            SMOKING: smoking, READMISSION_TIME: time, READMISSION_EVENT: event}


def readmission(h: Hospital, arm: np.ndarray, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray]:
    """Days to readmission or censoring (whole days, >= 1) and the event (1 readmitted, 0
    censored) of patients in ``arm`` order: exponential with the 90-day risk
    ``readmission_risk`` in the control arm and hazard × ``READMISSION_HR`` under treatment,
    censored by loss to follow-up and at ``follow_up_days``."""
    rate = -np.log1p(-h.readmission_risk) / FOLLOW_UP_DAYS
    rate = np.where(arm == LEVELS[1], rate * READMISSION_HR, rate)
    event_time = rng.exponential(1.0 / rate)
    lost = np.where(rng.random(arm.size) < LOST_SHARE,
                    rng.uniform(0.0, h.follow_up_days, arm.size), np.inf)
    end = np.minimum(lost, float(h.follow_up_days))
    time = np.clip(np.ceil(np.minimum(event_time, end)), 1, h.follow_up_days).astype(int)
    return time, (event_time <= end).astype(int)


def write_csv(columns: dict[str, np.ndarray], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(columns)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        writer.writerows(zip(*(columns[n].tolist() for n in names), strict=True))
    return path


def hospital_seed(seed: int, center_id: str) -> np.random.SeedSequence:
    """One seed stream per hospital, so each can be generated alone (compose) or all together."""
    index = [h.center_id for h in HOSPITALS].index(center_id)
    return np.random.SeedSequence(seed).spawn(len(HOSPITALS))[index]


def write_hospital(center_id: str, path: Path, seed: int = DEFAULT_SEED) -> Path:
    h = hospital(center_id)
    rng = np.random.default_rng(hospital_seed(seed, center_id))
    return write_csv(generate(h, rng), path)


def read_groups(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The (control, treated) outcome arrays of a CSV written by :func:`write_csv`."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    arm = np.array([r[GROUP_COLUMN] for r in rows])
    values = np.array([float(r[VARIABLE]) for r in rows])
    return values[arm == LEVELS[0]], values[arm == LEVELS[1]]
