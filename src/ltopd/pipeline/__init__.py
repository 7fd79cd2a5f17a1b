"""The orchestration layer: job bodies that read a job's spec, call the library, write files
atomically and log to MLflow. `ltopd.cli` dispatches to it; library packages never import it."""
