"""Building blocks every training method uses: data and features, models, clipping and per-example
gradients, secret batch sampling, device feedback, the forward-learning (ULR) and MAC helpers,
typed errors and option parsing. Nothing here knows the method registry or the run loop."""
