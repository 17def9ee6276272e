# Base-R plots of a study's results (no ggplot2): the DP boxplots as the Python client's
# Boxplots.plot() draws them, and the effect sizes as a forest plot.

#' Plot the DP boxplots of a study
#'
#' The boxes side by side (`graphics::bxp`), each center's and the pooled one per group; each
#' DP outlier count is written beyond its whisker (outliers are DP counts, not points).
#' @param study a `fedstats_study`.
#' @param main the title.
#' @param ... passed to [graphics::bxp()].
#' @return the boxplots' frame ([fs_boxplots()]), invisibly.
#' @export
fs_plot_boxplots <- function(study, main = "DP boxplots (numbers: DP outlier counts)", ...) {
  boxes <- fs_boxplots(study)
  stats <- rbind(boxes$lower_whisker, boxes$q1, boxes$median, boxes$q3, boxes$upper_whisker)
  z <- list(stats = stats, n = boxes$n, names = paste(boxes$center, boxes$group, sep = "\n"))
  at <- graphics::bxp(z, show.names = TRUE, main = main, las = 1, ...)
  graphics::text(at, boxes$lower_whisker, labels = boxes$lower_outliers, pos = 1, cex = 0.7)
  graphics::text(at, boxes$upper_whisker, labels = boxes$upper_outliers, pos = 3, cex = 0.7)
  invisible(boxes)
}

#' Plot the effect sizes of a study
#'
#' A forest plot of theta = P(Y > X) + P(Y = X)/2 per center and stratified, with their 95 %
#' intervals; the dashed line is no effect (1/2).
#' @inheritParams fs_plot_boxplots
#' @return the effects' frame ([fs_effects()]), invisibly.
#' @export
fs_plot_effects <- function(study, main = "Probabilistic index P(Y > X) + P(Y = X)/2", ...) {
  e <- fs_effects(study)
  y <- rev(seq_len(nrow(e)))
  graphics::plot(e$estimate, y, xlim = range(c(e$low, e$high, 0.5)), yaxt = "n",
                 pch = ifelse(e$center == "stratified", 18, 15), xlab = "theta (95 % interval)",
                 ylab = "", main = main, ...)
  graphics::segments(e$low, y, e$high, y)
  graphics::abline(v = 0.5, lty = 2)
  graphics::axis(2, at = y, labels = e$center, las = 1)
  invisible(e)
}
