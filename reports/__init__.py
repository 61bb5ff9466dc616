"""The overhead report generator, run as `python -m reports.make_report` (`ckptcheck report` does so with the source
root on PYTHONPATH). Its modules: report_data (inputs), overview (the first screen), report_tables, report_figures,
time_model, costs_report, plan_checks, baseline, report_html, report_format."""
