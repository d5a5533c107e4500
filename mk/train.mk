# The training workload (issue 5): make demo, make bench-train, and the
# training part of make test-gpu. Included by the top Makefile.
#   make demo          build, start wormhole-server (--backend auto), train the
#                      Fashion-MNIST MLP through the drop-ins, show accuracy and
#                      the server's forwarding statistics, stop the server
#   make bench-train   fixed steps forwarded (+ native with a GPU); one line:
#                      train_step_ms=.. native_step_ms=.. calls_per_step=.. backend=..
#   make demo-cnn      the same for wh-cnn, a LeNet-5-like CNN through cuDNN
#                      (4 epochs; DEMO_CNN_ARGS to change), with a loss plot
#   make test-gpu-train  native vs forwarded on a GPU (loss within 1e-4/epoch,
#                      step time within 5%); exits 2 without a GPU
DEMO_ARGS ?=

DEMO_CNN_ARGS ?=

.PHONY: demo demo-cnn bench-train test-gpu-train

demo: build
	@tests/train/demo.sh $(BUILD) $(DEMO_ARGS)

demo-cnn: build
	@tests/train/demo_cnn.sh $(BUILD) $(DEMO_CNN_ARGS)

bench-train: build
	@tests/train/bench.sh $(BUILD)

test-gpu-train: build
	@tests/train/gpu_train.sh $(BUILD)
