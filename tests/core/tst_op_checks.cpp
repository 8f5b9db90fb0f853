// The shared argument checks of the Backend ops (core/backend/op_checks.h): the output shape of
// each op for valid arguments, and for invalid ones an InvalidArgument status whose message
// starts with the op's name (every backend forwards these messages unchanged).
#include <QtTest>

#include <memory>
#include <string>

#include "core/backend/op_checks.h"

using namespace seedvae;

namespace {

// A defined tensor of `shape` (shape-only storage: the checks never look at data).
Tensor defined(Shape shape) {
  Tensor t;
  t.storage = std::make_shared<Storage>();
  t.shape = std::move(shape);
  return t;
}

// The attention weights of a C-channel block, all defined and well shaped.
AttentionWeights attention_weights(int64_t c, int groups) {
  AttentionWeights w;
  w.norm_weight = defined(Shape{c});
  w.norm_bias = defined(Shape{c});
  w.wq = defined(Shape{c, c});
  w.bq = defined(Shape{c});
  w.wk = defined(Shape{c, c});
  w.bk = defined(Shape{c});
  w.wv = defined(Shape{c, c});
  w.bv = defined(Shape{c});
  w.wo = defined(Shape{c, c});
  w.bo = defined(Shape{c});
  w.groups = groups;
  return w;
}

bool refused(const Status& s, const std::string& op, const std::string& fragment = {}) {
  return !s.is_ok() && s.code() == StatusCode::kInvalidArgument && s.message().rfind(op, 0) == 0 &&
         s.message().find(fragment) != std::string::npos;
}

}  // namespace

#define REFUSED(status, ...) QVERIFY2(refused(status, __VA_ARGS__), (status).message().c_str())

class tst_OpChecks : public QObject {
  Q_OBJECT

 private slots:
  void rank5() {
    QVERIFY(check_rank5(Shape{1, 2, 3, 4, 5}, "op", "input").is_ok());
    REFUSED(check_rank5(Shape{2, 3, 4, 5}, "op", "input"), "op: input must be 5-D", "[2, 3, 4, 5]");
  }

  void upload() {
    QVERIFY(check_upload(HostTensor(DType::kF32, Shape{2, 3}), "upload").is_ok());
    QVERIFY(check_upload(HostTensor(DType::kBF16, Shape{2, 0, 3}), "upload").is_ok());
    // A default tensor has shape [] (one element) but no bytes; an impossible shape gets none.
    REFUSED(check_upload(HostTensor{}, "upload"), "upload: host tensor []", "holds 0 bytes");
    REFUSED(check_upload(HostTensor(DType::kF16, Shape{2, -3}), "upload_weight(w)"),
            "upload_weight(w): host tensor [2, -3]");
  }

  void download_frames() {
    const HostTensor dst(DType::kF32, Shape{1, 4, 10, 8, 8});
    QVERIFY(check_download_frames(Shape{1, 4, 3, 8, 8}, dst, 7).is_ok());
    REFUSED(check_download_frames(Shape{1, 4, 3, 8, 8}, dst, 8), "download_frames", "at frame 8");
    REFUSED(check_download_frames(Shape{1, 4, 3, 8, 9}, dst, 0), "download_frames");
    const HostTensor half(DType::kF16, Shape{1, 4, 10, 8, 8});
    REFUSED(check_download_frames(Shape{1, 4, 3, 8, 8}, half, 0), "download_frames");
  }

  void conv3d() {
    Conv3dParams p;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
    auto y = conv3d_output_shape(Shape{1, 8, 5, 16, 12}, Shape{16, 8, 3, 3, 3}, p);
    QVERIFY2(y.is_ok(), y.status().message().c_str());
    QCOMPARE(*y, (Shape{1, 16, 3, 16, 12}));
    // Downsample3D: stride 2 in H and W, asymmetric padding (0, 1, 0, 1).
    Conv3dParams down;
    down.stride_h = down.stride_w = 2;
    down.pad_bottom = down.pad_right = 1;
    auto d = conv3d_output_shape(Shape{1, 8, 1, 16, 12}, Shape{8, 8, 1, 3, 3}, down);
    QVERIFY2(d.is_ok(), d.status().message().c_str());
    QCOMPARE(*d, (Shape{1, 8, 1, 8, 6}));

    REFUSED(conv3d_output_shape(Shape{1, 8, 5, 16}, Shape{16, 8, 3, 3, 3}, p).status(),
            "conv3d: input must be 5-D");
    REFUSED(conv3d_output_shape(Shape{1, 8, 5, 16, 12}, Shape{16, 8}, p).status(),
            "conv3d: weight must be 5-D");
    REFUSED(conv3d_output_shape(Shape{1, 8, 5, 16, 12}, Shape{16, 6, 3, 3, 3}, p).status(),
            "conv3d", "[16, 6, 3, 3, 3] expects 6");
    Conv3dParams zero_stride;
    zero_stride.stride_t = 0;
    REFUSED(
        conv3d_output_shape(Shape{1, 8, 5, 16, 12}, Shape{16, 8, 3, 3, 3}, zero_stride).status(),
        "conv3d", "strides");
    REFUSED(conv3d_output_shape(Shape{1, 8, 0, 16, 12}, Shape{16, 8, 1, 3, 3}, p).status(),
            "conv3d", "empty");
    REFUSED(conv3d_output_shape(Shape{1, 8, 2, 16, 12}, Shape{16, 8, 3, 3, 3}, p).status(),
            "conv3d", "smaller than the kernel");

    QVERIFY(check_conv3d_bias(Tensor{}, Shape{16, 8, 3, 3, 3}).is_ok());
    QVERIFY(check_conv3d_bias(defined(Shape{16}), Shape{16, 8, 3, 3, 3}).is_ok());
    REFUSED(check_conv3d_bias(defined(Shape{8}), Shape{16, 8, 3, 3, 3}),
            "conv3d: bias must be [16], got [8]");
  }

  void causal_pad() {
    const Shape x{1, 4, 3, 8, 8};
    auto replicated = causal_pad_shape(x, nullptr, 2);
    QVERIFY(replicated.is_ok());
    QCOMPARE(*replicated, (Shape{1, 4, 5, 8, 8}));
    const Shape memory{1, 4, 1, 8, 8};
    auto remembered = causal_pad_shape(x, &memory, 2);  // `frames` is unused with memory
    QVERIFY(remembered.is_ok());
    QCOMPARE(*remembered, (Shape{1, 4, 4, 8, 8}));
    auto none = causal_pad_shape(Shape{1, 4, 0, 8, 8}, nullptr, 0);
    QVERIFY(none.is_ok());
    QCOMPARE(*none, (Shape{1, 4, 0, 8, 8}));

    REFUSED(causal_pad_shape(x, nullptr, -1).status(), "causal_pad: negative frame count");
    REFUSED(causal_pad_shape(Shape{1, 4, 0, 8, 8}, nullptr, 2).status(), "causal_pad",
            "no frame to replicate");
    const Shape other{1, 5, 2, 8, 8};
    REFUSED(causal_pad_shape(x, &other, 2).status(), "causal_pad: memory [1, 5, 2, 8, 8]",
            "differ outside the frame axis");
    REFUSED(causal_pad_shape(Shape{4, 3, 8, 8}, nullptr, 2).status(), "causal_pad: input");
  }

  void slice_frames() {
    auto y = slice_frames_shape(Shape{1, 4, 5, 8, 8}, 1, 4);
    QVERIFY(y.is_ok());
    QCOMPARE(*y, (Shape{1, 4, 3, 8, 8}));
    auto empty = slice_frames_shape(Shape{1, 4, 5, 8, 8}, 5, 5);
    QVERIFY(empty.is_ok());
    QCOMPARE(empty->t(), int64_t{0});
    REFUSED(slice_frames_shape(Shape{1, 4, 5, 8, 8}, 2, 6).status(), "slice_frames",
            "range [2, 6)");
    REFUSED(slice_frames_shape(Shape{1, 4, 5, 8, 8}, 3, 2).status(), "slice_frames");
    REFUSED(slice_frames_shape(Shape{1, 4, 5, 8, 8}, -1, 2).status(), "slice_frames");
  }

  void frame_copy() {
    QVERIFY(check_frame_copy(Shape{1, 4, 6, 8, 8}, 2, Shape{1, 4, 3, 8, 8}, 1, 2).is_ok());
    REFUSED(check_frame_copy(Shape{1, 4, 6, 8, 8}, 5, Shape{1, 4, 3, 8, 8}, 0, 2),
            "copy_frames_into", "do not fit at 5");
    REFUSED(check_frame_copy(Shape{1, 4, 6, 8, 8}, 0, Shape{1, 2, 3, 8, 8}, 0, 1),
            "copy_frames_into");
    REFUSED(check_frame_copy(Shape{1, 4, 6, 8, 8}, 0, Shape{1, 4, 3, 8, 8}, 0, -1),
            "copy_frames_into");
  }

  void concat_frames() {
    auto y = concat_frames_shape(Shape{1, 4, 2, 8, 8}, Shape{1, 4, 3, 8, 8});
    QVERIFY(y.is_ok());
    QCOMPARE(*y, (Shape{1, 4, 5, 8, 8}));
    REFUSED(concat_frames_shape(Shape{1, 4, 2, 8, 8}, Shape{1, 4, 3, 8, 9}).status(),
            "concat_frames", "differ outside the frame axis");
    REFUSED(concat_frames_shape(Shape{1, 4, 2, 8}, Shape{1, 4, 3, 8, 8}).status(),
            "concat_frames: first must be 5-D");
    REFUSED(concat_frames_shape(Shape{1, 4, 2, 8, 8}, Shape{4}).status(),
            "concat_frames: second must be 5-D");
  }

  void group_norm() {
    const Shape x{1, 8, 2, 4, 4};
    GroupNormParams p;
    p.groups = 4;
    QVERIFY(check_group_norm(x, Tensor{}, Tensor{}, p).is_ok());
    QVERIFY(check_group_norm(x, defined(Shape{8}), defined(Shape{8}), p).is_ok());
    GroupNormParams three = p;
    three.groups = 3;
    REFUSED(check_group_norm(x, Tensor{}, Tensor{}, three), "group_norm",
            "not divisible into 3 groups");
    GroupNormParams zero = p;
    zero.groups = 0;
    REFUSED(check_group_norm(x, Tensor{}, Tensor{}, zero), "group_norm");
    GroupNormParams negative_eps = p;
    negative_eps.eps = -1.f;
    REFUSED(check_group_norm(x, Tensor{}, Tensor{}, negative_eps), "group_norm: eps");
    REFUSED(check_group_norm(x, defined(Shape{4}), Tensor{}, p),
            "group_norm: gamma must be [8], got [4]");
    REFUSED(check_group_norm(x, Tensor{}, defined(Shape{8, 1}), p), "group_norm: beta");
    REFUSED(check_group_norm(Shape{8, 2, 4, 4}, Tensor{}, Tensor{}, p),
            "group_norm: input must be 5-D");
    // group_norm_inplace reports under its own name.
    REFUSED(check_group_norm(x, Tensor{}, Tensor{}, three, "group_norm_inplace"),
            "group_norm_inplace: 8 channels");
  }

  void add() {
    QVERIFY(check_add(Shape{1, 4, 2, 8, 8}, Shape{1, 4, 2, 8, 8}).is_ok());
    QVERIFY(check_add(Shape{7}, Shape{7}).is_ok());
    REFUSED(check_add(Shape{1, 4, 2, 8, 8}, Shape{1, 4, 3, 8, 8}), "add_inplace",
            "differ in shape");
  }

  void depth_to_space() {
    auto spatial = depth_to_space_shape(Shape{1, 16, 3, 4, 5}, 1, false);
    QVERIFY(spatial.is_ok());
    QCOMPARE(*spatial, (Shape{1, 4, 3, 8, 10}));
    auto temporal = depth_to_space_shape(Shape{1, 16, 3, 4, 5}, 2, false);
    QVERIFY(temporal.is_ok());
    QCOMPARE(*temporal, (Shape{1, 2, 6, 8, 10}));
    auto first_chunk = depth_to_space_shape(Shape{1, 16, 3, 4, 5}, 2, true);
    QVERIFY(first_chunk.is_ok());
    QCOMPARE(*first_chunk, (Shape{1, 2, 5, 8, 10}));

    REFUSED(depth_to_space_shape(Shape{1, 12, 3, 4, 5}, 2, false).status(), "depth_to_space",
            "not a positive multiple of 8");
    REFUSED(depth_to_space_shape(Shape{1, 16, 3, 4, 5}, 3, false).status(), "depth_to_space",
            "1 or 2");
    REFUSED(depth_to_space_shape(Shape{1, 16, 3, 4, 5}, 1, true).status(), "depth_to_space",
            "drop_frame_1");
    REFUSED(depth_to_space_shape(Shape{1, 16, 0, 4, 5}, 2, true).status(), "depth_to_space",
            "empty input");
    REFUSED(depth_to_space_shape(Shape{16, 3, 4, 5}, 1, false).status(),
            "depth_to_space: input must be 5-D");
  }

  void attention() {
    const Shape x{1, 8, 2, 4, 4};
    QVERIFY(check_attention(x, attention_weights(8, 4)).is_ok());
    REFUSED(check_attention(x, attention_weights(8, 3)), "attention", "into 3 groups");
    REFUSED(check_attention(Shape{1, 0, 2, 4, 4}, attention_weights(0, 1)), "attention");
    AttentionWeights eps = attention_weights(8, 4);
    eps.eps = -1.f;
    REFUSED(check_attention(x, eps), "attention: eps");
    AttentionWeights missing = attention_weights(8, 4);
    missing.bk = Tensor{};
    REFUSED(check_attention(x, missing), "attention: to_k bias is undefined");
    AttentionWeights wrong = attention_weights(8, 4);
    wrong.wo = defined(Shape{8, 4});
    REFUSED(check_attention(x, wrong), "attention: to_out weight must be [8, 8], got [8, 4]");
    REFUSED(check_attention(x, AttentionWeights{}), "attention", "into 32 groups");
    REFUSED(check_attention(Shape{8, 2, 4, 4}, attention_weights(8, 4)),
            "attention: input must be 5-D");
  }

  // ---- the Wan VAEs' ops ---------------------------------------------------------------------
  void wan_ops() {
    QVERIFY(check_zeros(Shape{1, 4, 2, 3, 3}).is_ok());
    REFUSED(check_zeros(Shape{1, 4, -2, 3, 3}), "zeros: negative dimension");
    REFUSED(check_zeros(Shape{4, 2, 3, 3}), "zeros: shape must be 5-D");

    QVERIFY(check_rms_norm(Shape{1, 4, 2, 3, 3}, defined(Shape{4}), {}).is_ok());
    QVERIFY(check_rms_norm(Shape{1, 4, 2, 3, 3}, Tensor{}, {.silu = true}).is_ok());
    REFUSED(check_rms_norm(Shape{1, 4, 2, 3, 3}, defined(Shape{4, 1, 1, 1}), {}),
            "rms_norm: gamma must be [4]");
    REFUSED(check_rms_norm(Shape{1, 4, 2, 3, 3}, Tensor{}, {.eps = 0.f}), "rms_norm: eps");
    REFUSED(check_rms_norm(Shape{1, 0, 2, 3, 3}, Tensor{}, {}), "rms_norm", "no channel");

    QCOMPARE(*upsample_nearest_shape(Shape{1, 4, 2, 3, 5}), (Shape{1, 4, 2, 6, 10}));
    QCOMPARE(*frames_from_channels_shape(Shape{1, 8, 3, 2, 2}, 2), (Shape{1, 4, 6, 2, 2}));
    REFUSED(frames_from_channels_shape(Shape{1, 7, 3, 2, 2}, 2).status(), "frames_from_channels",
            "not divisible by the factor 2");

    QCOMPARE(*patchify_shape(Shape{1, 3, 5, 32, 48}, 2), (Shape{1, 12, 5, 16, 24}));
    QCOMPARE(*unpatchify_shape(Shape{1, 12, 5, 16, 24}, 2), (Shape{1, 3, 5, 32, 48}));
    REFUSED(patchify_shape(Shape{1, 3, 5, 31, 48}, 2).status(), "patchify", "multiples of");
    REFUSED(unpatchify_shape(Shape{1, 6, 5, 16, 24}, 2).status(), "unpatchify",
            "not a multiple of 4");

    // AvgDown3D(160, 320, 2, 2) on a first chunk of 1 frame and on 4 frames, identity (1, 1)
    QCOMPARE(*avg_down_shape(Shape{1, 160, 1, 8, 8}, {.out_channels = 320, .ft = 2, .fs = 2}),
             (Shape{1, 320, 1, 4, 4}));
    QCOMPARE(*avg_down_shape(Shape{1, 160, 4, 8, 8}, {.out_channels = 320, .ft = 2, .fs = 2}),
             (Shape{1, 320, 2, 4, 4}));
    QCOMPARE(*avg_down_shape(Shape{1, 640, 3, 2, 2}, {.out_channels = 640}),
             (Shape{1, 640, 3, 2, 2}));
    REFUSED(avg_down_shape(Shape{1, 4, 1, 6, 8}, {.out_channels = 4, .ft = 1, .fs = 4}).status(),
            "avg_down", "divide the height and width");
    REFUSED(avg_down_shape(Shape{1, 4, 1, 8, 8}, {.out_channels = 3, .ft = 1, .fs = 2}).status(),
            "avg_down", "do not divide the 16 expanded channels");

    // DupUp3D(1024, 1024, 2, 2) with and without the first-chunk drop, (1024, 512, 1, 2)
    QCOMPARE(*dup_up_shape(Shape{1, 16, 1, 2, 3},
                           {.out_channels = 16, .ft = 2, .fs = 2, .drop_first = true}),
             (Shape{1, 16, 1, 4, 6}));
    QCOMPARE(*dup_up_shape(Shape{1, 16, 3, 2, 3}, {.out_channels = 16, .ft = 2, .fs = 2}),
             (Shape{1, 16, 6, 4, 6}));
    QCOMPARE(*dup_up_shape(Shape{1, 16, 3, 2, 3}, {.out_channels = 8, .ft = 1, .fs = 2}),
             (Shape{1, 8, 3, 4, 6}));
    REFUSED(dup_up_shape(Shape{1, 16, 3, 2, 3}, {.out_channels = 3, .ft = 1, .fs = 1}).status(),
            "dup_up", "do not divide");
    REFUSED(dup_up_shape(Shape{1, 16, 0, 2, 3},
                         {.out_channels = 16, .ft = 2, .fs = 2, .drop_first = true})
                .status(),
            "dup_up", "empty input");

    const int64_t c = 8;
    RmsAttentionWeights w{defined(Shape{c}),    defined(Shape{c, c}), defined(Shape{c}),
                          defined(Shape{c, c}), defined(Shape{c}),    defined(Shape{c, c}),
                          defined(Shape{c}),    defined(Shape{c, c}), defined(Shape{c})};
    QVERIFY(check_rms_attention(Shape{1, c, 2, 4, 4}, w).is_ok());
    RmsAttentionWeights bad = w;
    bad.wo = defined(Shape{c, 1});
    REFUSED(check_rms_attention(Shape{1, c, 2, 4, 4}, bad),
            "rms_attention: proj weight must be [8, 8], got [8, 1]");
    bad = w;
    bad.gamma = Tensor{};
    REFUSED(check_rms_attention(Shape{1, c, 2, 4, 4}, bad),
            "rms_attention: norm gamma is undefined");
  }
};

QTEST_GUILESS_MAIN(tst_OpChecks)
#include "tst_op_checks.moc"
