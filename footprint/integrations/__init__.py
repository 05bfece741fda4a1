"""Where ML engineers train: framework callbacks, experiment-tracker logging and exports.

    from footprint.integrations.huggingface import FootprintCallback   # transformers.Trainer
    from footprint.integrations.lightning import FootprintCallback     # Lightning Trainer
    from footprint.integrations.accelerate import FootprintAccelerate  # an accelerate loop
    footprint.integrations.mlflow.log_run(run_or_assessment)           # and .wandb.log_run (offline)
    footprint.integrations.codecarbon.write_emissions_csv(run, path)   # codecarbon's emissions.csv columns
    footprint.integrations.prometheus.serve(tracker) / write_textfile(...)  # live metrics, opt-in, loopback

Owns: the callbacks and the session they share (`session`: open or join a tracker, count this rank's
tokens, FLOPs per optimizer step, windows, the run record and report at the end), live metrics
(`live`), the metrics and parameters an experiment tracker gets (`metrics`), MLflow and W&B logging,
and the export formats other tools parse. Framework packages are imported only inside the module
that needs them, never by ``import footprint``.
May import: `footprint.tracking`, `footprint.lca`, `footprint.reports`, `footprint.api`.
"""
