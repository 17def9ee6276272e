"""The works the Methods paragraphs cite, by key (docs/methods.md §11): an analysis declares the
references its sentences cite (``Analysis.references``), taking those several analyses share
from :data:`WORKS` with :func:`works`, and adding its own."""

from __future__ import annotations

from collections.abc import Mapping

WORKS: Mapping[str, str] = {
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
    "kaplan_meier": "Kaplan, E. L. & Meier, P. (1958). Nonparametric estimation from "
                    "incomplete observations. JASA 53, 457-481.",
    "greenwood": "Greenwood, M. (1926). The natural duration of cancer. Reports on Public "
                 "Health and Medical Subjects 33, HMSO.",
    "cutler": "Cutler, S. J. & Ederer, F. (1958). Maximum utilization of the life table method "
              "in analyzing survival. Journal of Chronic Diseases 8, 699-712.",
    "brookmeyer": "Brookmeyer, R. & Crowley, J. (1982). A confidence interval for the median "
                  "survival time. Biometrics 38, 29-41.",
    "mantel_logrank": "Mantel, N. (1966). Evaluation of survival data and two new rank order "
                      "statistics arising in its consideration. Cancer Chemotherapy Reports "
                      "50, 163-170.",
    "yusuf": "Yusuf, S., Peto, R., Lewis, J., Collins, R. & Sleight, P. (1985). Beta blockade "
             "during and after myocardial infarction: an overview of the randomized trials. "
             "Progress in Cardiovascular Diseases 27, 335-371.",
    "royston": "Royston, P. & Parmar, M. K. B. (2013). Restricted mean survival time: an "
               "alternative to the hazard ratio for the design and analysis of randomized "
               "trials with a time-to-event outcome. BMC Medical Research Methodology 13, 152.",
    "dwork_roth": "Dwork, C. & Roth, A. (2014). The algorithmic foundations of differential "
                  "privacy. Foundations and Trends in Theoretical Computer Science 9, 211-407.",
}


def works(*keys: str) -> dict[str, str]:
    """The entries of :data:`WORKS` under ``keys``."""
    return {key: WORKS[key] for key in keys}
