"""The export program (`python -m export.savedmodel`), the TF Serving config and the client.

The export programs import TensorFlow without its native start-up log lines; the serving client
(`python -m export.serving.client`) imports no TensorFlow at all for REST.
"""
