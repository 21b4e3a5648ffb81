"""runwatch and the tools people already run: TensorBoard, Prometheus, OpenTelemetry, Grafana."""
