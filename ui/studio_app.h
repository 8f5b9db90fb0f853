// The studio's entry point, shared by app/studio_main.cpp and the tests: command-line options,
// the display check, the headless job and the screenshot tour.
//
//   seedvae-studio                    the window, on the built-in model and the sample clip
//   seedvae-studio --demo [--ab]      ... and start a run (or an A/B comparison) at once;
//                                     --weights-a / --weights-b give a slot its own weights
//   seedvae-studio --headless [...]   the same job without windows; writes the report and stills
//                                     into --output (default out/studio-report-<time>) and prints
//                                     it
//   seedvae-studio --screenshots DIR [--screenshot-size WxH]
//                                     the real window (offscreen) at that size (default 1366x768),
//                                     an A/B demo, PNGs of the views
//
// Without a display (QT_QPA_PLATFORM unset and no DISPLAY / WAYLAND_DISPLAY on Linux) --headless
// is implied.
#pragma once

#include <QObject>
#include <QSize>
#include <QString>
#include <QStringList>
#include <memory>
#include <optional>

#include "ui/backend_catalog.h"
#include "ui/report.h"
#include "ui/studio_types.h"

namespace seedvae::ui {

class ChartsPanel;
class RunController;
class AsyncLoader;

struct StudioOptions {
  bool demo = false;
  bool headless = false;
  bool ab = false;
  QString input;        // video path; empty: the demo clip when installed, else the
                        // synthetic sample clip
  QString weights;      // checkpoint; empty: the built-in model
  QString preset;       // settings (slot A) from a preset file
  QString preset_b;     // slot B from a preset file (default: A's settings when B names other
                        // weights than A, else A with blend tiling)
  QString output;       // headless report folder
  QString screenshots;  // screenshot folder
  int frames = 0;       // frames to read (0: all / 17 for the sample clip)
  int sample_width = 256, sample_height = 256;
  bool sample_size_set =
      false;              // --sample-size given: the synthetic sample clip, never the demo clip
  bool no_video = false;  // headless: skip writing the reconstructed video
  // A/B slots' own weights: a checkpoint, or "synthetic:<name>" (synthetic_weight_names()); empty:
  // the loaded model's (--weights).
  QString weights_a, weights_b;
  // The window's size for --screenshots.
  QSize screenshot_size{1366, 768};
};

// Returns the options, or nullopt with `message` set (help/version text with `exit_code` 0, or an
// error with exit code 2).
std::optional<StudioOptions> parse_studio_options(const QStringList& arguments, QString* message,
                                                  int* exit_code);
// False on Linux when QT_QPA_PLATFORM is unset and neither DISPLAY nor WAYLAND_DISPLAY is.
bool display_available();
// Slot B of the demo comparison: slot A with reference-compatible blend tiling of about half the
// frame (so the tile overlay and the seams have something to show).
RunOptions demo_b_settings(const RunOptions& a, int width, int height);
// A slot's weights given on the command line (StudioOptions::weights_a / weights_b); nullopt when
// empty.
std::optional<WeightsSpec> slot_weights_option(const QString& value);
JobInput input_from_options(const StudioOptions& o);
// The file name of a screenshot of `view` ("split", "ab", ...) taken at `size`: studio-<view>.png
// at 1366x768 (the pictures the documentation shows), studio-<view>-<W>x<H>.png at other sizes.
QString screenshot_file_name(const QString& view, const QSize& size);

// The headless job: loads the weights, runs (or runs A/B) through the same RunController the
// window uses, feeds a hidden ChartsPanel, writes the report, prints its folder. finished(code):
// 0 done, 1 run failed, 3 bad input, 130 cancelled.
class HeadlessJob : public QObject {
  Q_OBJECT

 public:
  HeadlessJob(std::shared_ptr<const BackendCatalog> catalog, StudioOptions options,
              QObject* parent = nullptr);
  ~HeadlessJob() override;
  void start();
  void cancel();
  QString outputDirectory() const { return output_; }
  const std::optional<ReportResult>& report() const { return report_; }
  RunController* controller() const { return controller_; }

 signals:
  void finished(int exit_code);

 private:
  void run(const WeightsInfo& weights);
  void finish(int code);

  std::shared_ptr<const BackendCatalog> catalog_;
  StudioOptions options_;
  RunController* controller_;
  AsyncLoader* loader_;
  std::unique_ptr<ChartsPanel> charts_;
  WeightsInfo weights_;
  QString output_;
  std::optional<RunSummary> run_;
  std::optional<AbComparison> ab_;
  std::optional<ReportResult> report_;
  int code_ = 0;
  int report_code_ = 0;  // the exit code once the report is written (1: an A/B slot failed)
  double last_print_ = -10;
};

// Runs the studio (creates the QApplication). `catalog` lists the backends of this build.
int run_studio(int argc, char** argv, std::shared_ptr<const BackendCatalog> catalog);

// Sets the process's heap up for a responsive GUI beside the engine (run_studio calls it first;
// tests measuring GUI stalls call it too). Growing or shrinking the heap (glibc: brk, mprotect)
// takes the address space's lock, which the engine's thread can hold for hundreds of ms while
// the GPU driver pins host memory: the GUI thread would wait that long for a small allocation.
// So the heap grows in 64 MiB steps and gives memory back beyond 256 MiB of free top (the
// engine trims it explicitly every few chunks), and blocks up to 32 MiB come from the heap
// (glibc's own upper bound for them) rather than mmap. glibc only; elsewhere a no-op.
void prepare_gui_process();

}  // namespace seedvae::ui
