"""The worker side of a run, in the child process that trains: the recipe, the builders of the libraries'
objects, model loading, callbacks, hardware, and the training methods (methods/)."""
