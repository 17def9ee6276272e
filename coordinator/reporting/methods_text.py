"""The "Methods" paragraph of a study, generated from its spec, result and reproducibility
record (``GET /v1/studies/{id}``), for an analyst to paste into a paper: the tests named, their
sidedness and α, the effect size and its interval method, K and ε per center, the DP algorithms
with their citations, the software and the centers' data versions.

Only what the study did is said; every sentence comes from a field of the view (nothing is
assumed about an analysis the spec did not ask). References are listed after the paragraph, as
docs/methods.md §11 gives them.
"""

from __future__ import annotations

from typing import Any


def fmt(value: Any) -> str:
    """A number as the paragraph writes it (at most 4 significant digits)."""
    return f"{float(value):.4g}"


def succeeded(analysis: dict[str, Any]) -> bool:
    return analysis.get("status", "succeeded") != "failed"


def included_centers(result: dict[str, Any]) -> list[str]:
    """The centers whose releases the result holds (``center_status``; a result stored before
    it: the centers asked less those left out at the survey)."""
    status = result.get("center_status")
    if status:
        return [s["center"] for s in status if s["status"] == "included"]
    out = {e["center"] for e in result.get("excluded") or []}
    return [c for c in result.get("centers") or [] if c not in out]

TEST_NAMES = {
    "sum": "the sum test (the centers' Mann-Whitney U statistics summed over their null "
           "variances)",
    "weighted": "the weighted test (the centers' z-values weighted by n·m/√V)",
    "fisher": "Fisher's combination of the centers' p-values (χ² with 2L degrees of freedom; "
              "two-sided by doubling the smaller one-sided p)",
    "table": "the Mann-Whitney test on the federated table (records in one bin tied)",
}
SIDES = {"two-sided": "two-sided", "less": "one-sided (alternative: X tends to be smaller "
         "than Y)", "greater": "one-sided (alternative: X tends to be larger than Y)"}
DP_QUANTILES = {
    "joint_exp": ("JointExp", "gillenwater"),
    "private_quantile": ("PrivateQuantile, one level at a time", "smith"),
    "approx_quantile": ("ApproxQuantile", "kaplan"),
    "unbounded": ("the unbounded quantile walk", "durfee"),
}

REFERENCES = {
    "becher": "Becher, O., Marcus-Kalish, M. & Steinberg, D. M. (2023). Federated statistical "
              "analysis: non-parametric testing and quantile estimation. Frontiers in Applied "
              "Mathematics and Statistics 9:1267034.",
    "cousins": "Cousins, R. D. & Highland, V. L. (1992). Incorporating systematic "
    "uncertainties into an upper limit. Nuclear Instruments and Methods in Physics Research A "
    "320, 331-335.",
    "newcombe": "Newcombe, R. G. (2006). Confidence intervals for an effect size measure based "
                "on the Mann-Whitney statistic. Part 2: asymptotic methods and evaluation. "
                "Statistics in Medicine 25, 559-573.",
    "acion": "Acion, L., Peterson, J. J., Temple, S. & Arndt, S. (2006). Probabilistic index: an "
             "intuitive non-parametric approach to measuring the size of treatment effects. "
             "Statistics in Medicine 25, 591-602.",
    "dwork": "Dwork, C., McSherry, F., Nissim, K. & Smith, A. (2006). Calibrating noise to "
             "sensitivity in private data analysis. TCC 2006.",
    "ramsay": "Ramsay, K. & Diaz-Rodriguez, J. (2025). Differentially private boxplots. ICML "
              "2025 (arXiv:2405.20415).",
    "hay": "Hay, M., Rastogi, V., Miklau, G. & Suciu, D. (2010). Boosting the accuracy of "
           "differentially private histograms through consistency. PVLDB 3(1).",
    "gillenwater": "Gillenwater, J., Joseph, M. & Kulesza, A. (2021). Differentially private "
                   "quantiles. ICML 2021.",
    "smith": "Smith, A. (2011). Privacy-preserving statistical estimation with optimal "
             "convergence rates. STOC 2011.",
    "kaplan": "Kaplan, H., Schnapp, S. & Stemmer, U. (2022). Differentially private "
              "approximate quantiles. ICML 2022.",
    "durfee": "Durfee, D. (2023). Unbounded differentially private quantile and maximum "
              "estimation. NeurIPS 2023.",
    "kruskal": "Kruskal, W. H. & Wallis, W. A. (1952). Use of ranks in one-criterion variance "
               "analysis. Journal of the American Statistical Association 47, 583-621.",
    "van_elteren": "van Elteren, P. H. (1960). On the combination of independent two-sample "
                   "tests of Wilcoxon. Bulletin of the International Statistical Institute 37, "
                   "351-361.",
    "jonckheere": "Jonckheere, A. R. (1954). A distribution-free k-sample test against ordered "
                  "alternatives. Biometrika 41, 133-145.",
    "fisher": "Fisher, R. A. (1932). Statistical Methods for Research Workers, 4th ed. Oliver & "
              "Boyd.",
    "cochran": "Cochran, W. G. (1954). The combination of estimates from different experiments. "
               "Biometrics 10, 101-129.",
    "higgins": "Higgins, J. P. T. & Thompson, S. G. (2002). Quantifying heterogeneity in a "
               "meta-analysis. Statistics in Medicine 21, 1539-1558.",
    "viechtbauer": "Viechtbauer, W. (2007). Confidence intervals for the amount of "
                   "heterogeneity in meta-analysis. Statistics in Medicine 26, 37-52.",
    "hodges": "Hodges, J. L. & Lehmann, E. L. (1963). Estimates of location based on rank "
              "tests. Annals of Mathematical Statistics 34, 598-611.",
    "moses": "Moses, L. E. (1953). Non-parametric methods. In Walker, H. & Lev, J., Statistical "
             "Inference, Holt, 426-450.",
    "mantel": "Mantel, N. & Haenszel, W. (1959). Statistical aspects of the analysis of data "
              "from retrospective studies of disease. Journal of the National Cancer Institute "
              "22, 719-748.",
    "wilson": "Wilson, E. B. (1927). Probable inference, the law of succession, and statistical "
              "inference. JASA 22, 209-212.",
}


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _analyses(view: dict[str, Any]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """(index, the spec's analysis, its result) of every analysis that gave a result: the
    paragraph describes what the study reports, not what failed."""
    results = (view.get("result") or {}).get("analyses") or []
    out = []
    for i, asked in enumerate(view["spec"].get("analyses") or []):
        found = results[i] if i < len(results) else None
        if found is not None and succeeded(found):
            out.append((i, asked, found))
    return out


def methods_sentences(view: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the paragraph's sentences, the keys of the references they cite)."""
    spec = view["spec"]
    record = view.get("reproducibility") or {}
    cited: list[str] = []

    def cite(key: str) -> str:
        if key not in cited:
            cited.append(key)
        return key

    centers = [c for c in record.get("centers") or [] if c.get("included", True)]
    result_of = view.get("result")
    included = included_centers(result_of) if result_of else [c["center"] for c in centers]
    said: list[str] = []
    groups = spec.get("groups")
    what = f"the variable {spec['variable']} of dataset {spec['dataset']}"
    if groups and len(groups) == 2:
        what += f", comparing group {groups[1]} (Y) with group {groups[0]} (X)"
    elif groups:
        what += f", comparing its {len(groups)} groups {', '.join(groups)}"
    said.append(
        f"We analysed {what} across {len(included)} centers ({', '.join(included)}) without "
        "moving any record: each center released only K-anonymous counts "
        f"(K = {spec['k']}; no released count between 1 and K − 1) and differentially private "
        "(DP) summaries, with one patient's record as the privacy unit.")
    neighbouring = sorted({c["neighbouring"] for c in centers if c.get("neighbouring")})
    if neighbouring:
        said.append("The centers' neighbouring relation was "
                    + _join([n.replace("_", "/") for n in neighbouring]) + ".")
    primary = spec.get("primary")
    for i, asked, result in _analyses(view):
        kind = asked["kind"]
        if kind == "table":
            cite("becher")
            said.append("A federated K-anonymous bin table of the variable was built center "
                        "after center (Becher et al. 2023, Algorithms 1-6); it spends no ε.")
        elif kind == "mwu":
            cite("becher")
            tests = [TEST_NAMES[t] for t in asked.get("tests") or TEST_NAMES]
            if "fisher" in (asked.get("tests") or TEST_NAMES):
                cite("fisher")
            side = SIDES.get(asked.get("alternative", "two-sided"), asked.get("alternative"))
            said.append(f"Groups were compared by the federated Mann-Whitney tests of Becher "
                        f"et al. (2023): {_join(tests)}; all {side}.")
            if primary and primary.get("analysis") == i:
                said.append(f"The pre-specified primary test was the {primary['test']} test at "
                            f"α = {fmt(primary.get('alpha', 0.05))}; the other tests are "
                            "secondary and reported without adjustment for multiplicity.")
            elif not primary:
                said.append("No primary test was pre-specified; every p-value is reported "
                            "without adjustment for multiplicity.")
            if asked.get("epsilon") is not None:
                cite("dwork")
                said.append(f"Each center released its U statistic with Laplace noise at "
                            f"ε = {fmt(asked['epsilon'])} (Dwork et al. 2006); the p-values "
                            "come from the exact law of the statistic plus the noise.")
            cite("acion")
            cite("newcombe")
            said.append("The effect size is the probabilistic index θ = P(Y > X) + ½·P(Y = X) "
                        "(Acion et al. 2006), per center and stratified over the centers "
                        "(weighted by n_X·n_Y), with 95 % score intervals (Newcombe 2006, "
                        "Method 5)" + (", widened for the DP noise" if asked.get("epsilon")
                                       is not None else "") + ".")
            if result.get("heterogeneity") is not None:
                cite("cochran")
                cite("higgins")
                cite("viechtbauer")
                said.append("Heterogeneity of the centers' indices was assessed by Cochran's "
                            "(1954) Q with inverse-variance weights (each center's variance "
                            "at the pooled index) and I² (Higgins & Thompson 2002) with its "
                            "Q-profile interval (Viechtbauer 2007).")
        elif kind == "dp_mwu":
            cite("becher")
            cite("dwork")
            asked_tests = asked.get("tests") or ["sum", "weighted", "fisher"]
            if "fisher" in asked_tests:
                cite("fisher")
            side = SIDES.get(asked.get("alternative", "two-sided"), asked.get("alternative"))
            share = asked.get("size_share", 0.2)
            names = _join([TEST_NAMES[t] for t in asked_tests])
            said.append(
                f"Groups were compared by a differentially private version of the federated "
                f"Mann-Whitney tests of Becher et al. (2023): {names}; all {side}. Each "
                f"center spent ε = {fmt(asked['epsilon'])} under add/remove "
                f"neighbours: {fmt(share)} of it on Laplace-noised sizes of the two groups, "
                "the rest on its U statistic computed over at most M records per group (M "
                "read off the noisy sizes; a uniform subset of a larger group) plus Laplace "
                "noise of scale 2M over that ε (Dwork et al. 2006); the p-values come from the "
                "exact law of the statistic's normal approximation plus the noise, with the "
                "no-ties null variance of the noisy sizes (conservative with ties).")
            if primary and primary.get("analysis") == i:
                said.append(f"The pre-specified primary test was the {primary['test']} test at "
                            f"α = {fmt(primary.get('alpha', 0.05))}; the other tests are "
                            "secondary and reported without adjustment for multiplicity.")
            cite("acion")
            cite("newcombe")
            cite("cousins")
            said.append("The effect size is the probabilistic index θ = P(Y > X) + ½·P(Y = X) "
                        "(Acion et al. 2006) read from the noisy statistic and sizes, per center "
                        "and stratified, with 95 % score-type intervals (the variance of "
                        "Newcombe 2006, Method 5, at each candidate θ) that add the Laplace "
                        "noise on U and integrate the noisy sizes out over their known error "
                        "law (Cousins & Highland 1992); the estimate is the median of that "
                        "confidence distribution.")
        elif kind == "dp_boxplot":
            cite("ramsay")
            bounds = asked["bounds"]
            boxes = [b for b, asked_for in (("its own box", asked.get("per_center", True)),
                                            ("its part of the pooled box",
                                             asked.get("pooled", True))) if asked_for]
            text = (f"DP boxplots of {asked.get('group') or 'all records'} were made at "
                    f"ε = {fmt(asked['epsilon'])} per box, each center spending it on "
                    f"{' and on '.join(boxes)}"
                    + (f" (ε = {fmt(len(boxes) * asked['epsilon'])} in all)"
                       if len(boxes) > 1 else "")
                    + f", the data clipped to the public bounds [{fmt(bounds[0])}, "
                    f"{fmt(bounds[1])}]")
            if asked.get("per_center", True):
                text += ("; each center's box by DPBoxplot (Ramsay & Diaz-Rodriguez 2025)")
            if asked.get("pooled", True):
                cite("hay")
                text += ("; the pooled box from a DP tree histogram summed over the centers "
                         "(consistency by Hay et al. 2010)")
            said.append(text + ".")
        elif kind == "dp_quantiles":
            name, key = DP_QUANTILES.get(asked.get("algorithm", "joint_exp"),
                                         (asked.get("algorithm"), ""))
            if key:
                cite(key)
            said.append(f"DP quantiles at levels {', '.join(fmt(v) for v in asked['levels'])} "
                        f"were released by each center with {name} at ε = "
                        f"{fmt(asked['epsilon'])}, bounds [{fmt(asked['bounds'][0])}, "
                        f"{fmt(asked['bounds'][1])}].")
        elif kind == "quantiles":
            cite("becher")
            said.append("Quantiles at levels " + ", ".join(fmt(v) for v in asked["levels"])
                        + " were estimated from the federated table (Becher et al. 2023, §7; "
                        "estimators " + ", ".join(asked.get("estimators") or ["default"])
                        + ").")
        elif kind == "shift":
            allowance = result.get("allowance")
            allowance = 0.5 if allowance is None else allowance
            cite("hodges")
            cite("moses")
            said.append("The shift of Y against X was estimated by Hodges & Lehmann's (1963) "
                        f"median of pairwise differences with Moses's (1953) "
                        f"{fmt(100 * result.get('level', asked.get('level', 0.95)))} % interval, "
                        "computed on the federated table's bin midpoints, the interval widened "
                        f"by a binning allowance of {fmt(allowance)} times the bins' "
                        "half-widths (it contains the records' own interval "
                        "when each record lies in that central fraction of its bin, and "
                        "excludes 0 only when the table's rank count is significant); the "
                        "bounds the bins allow for sure are reported beside it "
                        "(docs/methods.md §12.3). It spends no ε.")
        elif kind == "kruskal":
            cite("kruskal")
            cite("van_elteren")
            said.append(f"The {len(groups or [])} groups were compared by Kruskal-Wallis tests "
                        "(Kruskal & Wallis 1952) on the federated table and on each center's "
                        "own K-anonymous table (records in one bin tied; no ε spent), and "
                        "stratified by center by summing the centers' rank sums and by van "
                        "Elteren's (1960) weighting of each center's ranks by 1/(N + 1).")
            if asked.get("ordered"):
                cite("jonckheere")
                said.append(f"A trend across the groups in the order {', '.join(groups or [])} "
                            f"was tested by Jonckheere-Terpstra ({asked.get('alternative')}; "
                            "Jonckheere 1954) on the same tables, tie-corrected, its p-value "
                            "from the exact permutation law given the ties for tables of up "
                            "to 50 whole records and from the normal law otherwise.")
        elif kind == "describe":
            mode = result.get("mode") or asked.get("mode") or (
                "dp" if asked.get("epsilon") else "table")
            if mode == "dp":
                cite("dwork")
                epsilon = result.get("epsilon") or asked.get("epsilon")
                said.append(f"Descriptive statistics (Table 1) were released with ε-DP at "
                            f"ε = {fmt(epsilon)} per variable and arm per center (Laplace "
                            "mechanism); intervals are 95 % intervals of the DP noise.")
            else:
                said.append("Descriptive statistics (Table 1) were read from the federated "
                            "K-anonymous tables (no ε spent); their intervals are exact bounds "
                            "from the bins.")
        elif kind == "categorical":
            cite("wilson")
            cite("mantel")
            source = (f"each center's ε-DP counts (two-sided geometric noise, ε = "
                      f"{fmt(asked.get('epsilon'))} per arm; the tests corrected for the noise "
                      "to first order)" if result.get("mode") == "dp" else
                      "each center's K-anonymous counts per category (no ε)")
            said.append(f"The categorical variable {asked['variable']} was summarised as n (%) "
                        "with Wilson (1927) intervals and compared between arms with Pearson's "
                        "χ² and the Cochran-Mantel-Haenszel test stratified by center (Mantel & "
                        f"Haenszel 1959), from {source}.")
    total = {c["center"]: c.get("epsilon", 0.0) for c in centers}
    if any(total.values()):
        said.append("In all, the study spent " + ", ".join(
            f"ε = {fmt(e)} at {c}" for c, e in total.items()) + " (sequential composition).")
    epochs = [f"{c['center']} epoch {c['epoch']}" for c in centers if c.get("epoch")]
    software = record.get("software") or {}
    if software:
        commit = (f"commit {software['commit'][:12]}" if software.get("commit")
                  else "commit unknown")
        said.append(f"Computed with {software.get('name')} {software.get('version')} "
                    f"({commit})" + (f" on the centers' data versions {', '.join(epochs)}"
                                     if epochs else "")
                    + f"; study {view.get('id')}, spec SHA-256 "
                    f"{str(record.get('spec_sha256', ''))[:16]}….")
    return said, cited


def methods_paragraph(view: dict[str, Any]) -> str:
    """The paragraph, then its references."""
    said, cited = methods_sentences(view)
    text = " ".join(said)
    if cited:
        text += "\n\nReferences\n" + "\n".join(REFERENCES[k] for k in cited)
    return text
