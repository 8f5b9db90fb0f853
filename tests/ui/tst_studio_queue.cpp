// The studio's job queue (ui/queue_panel.h) on the queue file $SEEDVAE_QUEUE_FILE points at: adding
// the current clip writes a job with the window's input, frame range, settings and weights; the
// panel's reorder, remove, pause and resume reach the file and the CLI's edits reach the panel; a
// queue of a failing job (a missing input) and a good one runs on the engine thread while
// interactive runs wait, and shows failed, then done with its results; Stop leaves the running
// job queued; a decode the CLI queues shows and runs in the panel; the A/B panel queues the
// picked slot's settings over the whole input.
#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPointer>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QToolButton>
#include <QtTest>
#include <cmath>

#include "core/pipeline/job_queue.h"
#include "studio_test_util.h"
#include "ui/ab_panel.h"
#include "ui/info_panel.h"
#include "ui/loaders.h"
#include "ui/queue_panel.h"
#include "ui/run_controller.h"
#include "ui/settings_panel.h"

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

class tst_StudioQueue : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString queue_file_;

  // The file's jobs (empty when it cannot be read: the callers' checks then fail).
  std::vector<QueuedJob> file_jobs() const {
    auto q = JobQueue::load(to_fs_path(queue_file_));
    if (!q) qWarning("queue file: %s", q.status().to_string().c_str());
    return q ? q->jobs() : std::vector<QueuedJob>{};
  }
  std::vector<int64_t> file_ids() const {
    std::vector<int64_t> ids;
    for (const QueuedJob& j : file_jobs()) ids.push_back(j.id);
    return ids;
  }
  const QueuedJob* find(const std::vector<QueuedJob>& jobs, int64_t id) const {
    for (const QueuedJob& j : jobs) {
      if (j.id == id) return &j;
    }
    return nullptr;
  }
  // The panel's row of job `id` (-1: none) and the text of its `column`.
  static int row_of(QueuePanel* panel, int64_t id) {
    for (int r = 0; r < panel->table()->rowCount(); ++r) {
      if (panel->table()->item(r, 0)->text() == QString::number(id)) return r;
    }
    return -1;
  }
  static QString cell(QueuePanel* panel, int64_t id, int column) {
    const int r = row_of(panel, id);
    return r < 0 ? QString() : panel->table()->item(r, column)->text();
  }
  static void click(QueuePanel* panel, const char* name) {
    auto* b = panel->findChild<QPushButton*>(name);
    QVERIFY2(b && b->isEnabled(), name);
    b->click();
  }
  // Clicks an edit's button and waits until the panel has written the file and read it back.
  static void edit(QueuePanel* panel, const char* name) {
    QSignalSpy done(panel, &QueuePanel::editFinished);
    click(panel, name);
    QVERIFY2(done.wait(10000), name);
    QVERIFY2(done.first().at(0).toBool(), qPrintable(done.first().at(1).toString()));
  }
  // Adds `job` through the panel; its id (0 when it failed).
  static int64_t add(QueuePanel* panel, QueuedJob job) {
    QSignalSpy done(panel, &QueuePanel::editFinished);
    const Status st = panel->addJob(std::move(job));
    if (!st.is_ok() || !done.wait(10000) || !done.first().at(0).toBool()) return 0;
    return done.first().at(2).toLongLong();
  }
  // A job of the built-in sample clip (w x h x frames) with the tiny synthetic weights.
  static QueuedJob sample_job(int w, int h, int frames) {
    QueuedJob j;
    j.weights = "synthetic:tiny";
    j.options.threads = 1;
    j.sample_width = w;
    j.sample_height = h;
    j.sample_frames = frames;
    return j;
  }
  std::unique_ptr<MainWindow> ready_window(const QString& tag) {
    auto w = make_window(dir_, tag);
    QSignalSpy weights(w.get(), &MainWindow::weightsLoaded);
    if (!weights.wait(20000)) qWarning("the weights did not load");
    return w;
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    register_studio_types();
    QVERIFY(dir_.isValid());
    // In a folder that does not exist yet: the first job makes it (and the panel starts watching).
    queue_file_ = dir_.filePath("data/queue.json");
    qputenv("SEEDVAE_QUEUE_FILE", queue_file_.toUtf8());
  }

  void init() { QFile::remove(queue_file_); }

  // "Add current…" opens the dialog with the window's input and frame range; the job in the file
  // has them, the chosen output, the settings panel's settings and the loaded weights. An output
  // that would overwrite the input keeps the dialog open with the reason.
  void addCurrentWritesTheFile() {
    auto w = ready_window("add");
    QueuePanel* panel = w->queuePanel();
    QCOMPARE(panel->queueFile(), queue_file_);
    QCOMPARE(panel->table()->rowCount(), 0);
    QSignalSpy loaded(w.get(), &MainWindow::videoLoaded);
    const QString video = write_sample_video(dir_, "clip_frames", 32, 32, 9);
    w->openVideo(video);
    QVERIFY(loaded.wait(20000));
    w->infoPanel()->setRange(1, 6, 1, 100);
    RunOptions s = w->settingsPanel()->settings();
    s.chunk_latents = 2;
    w->applySettings(s);

    click(panel, "queueAdd");
    QPointer<QDialog> dialog = w->findChild<QDialog*>("queueAddDialog");
    QVERIFY(dialog && dialog->isVisible());
    QCOMPARE(dialog->findChild<QSpinBox*>("queueFirst")->value(), 1);
    QCOMPARE(dialog->findChild<QSpinBox*>("queueCount")->value(), 6);
    QCOMPARE(dialog->findChild<QSpinBox*>("queueStride")->value(), 1);
    auto* output = dialog->findChild<QLineEdit*>("queueOutput");
    QVERIFY2(output->text().endsWith("clip_frames_seedvae.mkv"), qPrintable(output->text()));
    QPushButton* ok = dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok);

    output->setText(video);  // the input itself: refused, the dialog stays
    ok->click();
    QVERIFY(dialog && dialog->isVisible());
    auto* error = dialog->findChild<QLabel*>("queueAddError");
    QVERIFY(error->isVisibleTo(dialog));
    QVERIFY2(!error->text().isEmpty(), "no reason given");
    QVERIFY(file_jobs().empty());

    const QString out = dir_.filePath("add.mkv");
    output->setText(out);
    dialog->findChild<QSpinBox*>("queueCount")->setValue(5);
    QSignalSpy added(panel, &QueuePanel::editFinished);
    ok->click();
    QTRY_VERIFY_WITH_TIMEOUT(!dialog || !dialog->isVisible(), 5000);
    QVERIFY(added.wait(10000));

    const std::vector<QueuedJob> jobs = file_jobs();
    QCOMPARE(jobs.size(), size_t{1});
    const QueuedJob& j = jobs.front();
    QCOMPARE(from_fs_path(j.input), QFileInfo(video).absoluteFilePath());
    QCOMPARE(j.first_frame, int64_t{1});
    QCOMPARE(j.max_frames, int64_t{5});
    QCOMPARE(j.stride, 1);
    QCOMPARE(from_fs_path(j.output), out);
    QCOMPARE(QString::fromStdString(j.weights),
             QString::fromStdString(queue_weights(default_weights_spec())));
    QCOMPARE(j.options.chunk_latents, 2);
    QCOMPARE(QString::fromStdString(to_json(j.options)),
             QString::fromStdString(
                 to_json(w->controller()->catalog().normalized(w->settingsPanel()->settings()))));
    QCOMPARE(j.state, QueueState::kQueued);
    QCOMPARE(panel->table()->rowCount(), 1);
    QCOMPARE(cell(panel, j.id, 1), QString("queued"));
    QVERIFY(cell(panel, j.id, 2).contains("add.mkv"));
  }

  // Up, Down, Pause, Resume and Remove rewrite the file; edits by `seedvae queue` (another
  // process) appear in the panel.
  void editsReachTheFileAndBack() {
    auto w = ready_window("edits");
    QueuePanel* panel = w->queuePanel();
    std::vector<int64_t> id;
    for (int i = 0; i < 3; ++i) {
      id.push_back(add(panel, sample_job(32, 32, 5)));
      QVERIFY(id.back() != 0);
    }
    QCOMPARE(file_ids(), id);
    QCOMPARE(panel->table()->rowCount(), 3);

    panel->selectJob(id[2]);
    edit(panel, "queueUp");
    QCOMPARE(file_ids(), (std::vector<int64_t>{id[0], id[2], id[1]}));
    QCOMPARE(*panel->selectedJob(), id[2]);  // the selection follows the job
    panel->selectJob(id[0]);
    edit(panel, "queueDown");
    QCOMPARE(file_ids(), (std::vector<int64_t>{id[2], id[0], id[1]}));
    panel->selectJob(id[1]);
    QVERIFY(!panel->findChild<QPushButton*>("queueDown")->isEnabled());  // already last

    panel->selectJob(id[2]);
    QVERIFY(!panel->findChild<QPushButton*>("queueResume")->isEnabled());
    edit(panel, "queuePause");
    QCOMPARE(find(file_jobs(), id[2])->state, QueueState::kPaused);
    QCOMPARE(cell(panel, id[2], 1), QString("paused"));
    QVERIFY(!panel->findChild<QPushButton*>("queuePause")->isEnabled());
    edit(panel, "queueResume");
    QCOMPARE(find(file_jobs(), id[2])->state, QueueState::kQueued);

    panel->selectJob(id[0]);
    edit(panel, "queueRemove");
    QCOMPARE(file_ids(), (std::vector<int64_t>{id[2], id[1]}));
    QCOMPARE(panel->table()->rowCount(), 2);

    // Another process edits the file: the panel follows.
    auto cli = [&](const QStringList& args) {
      QProcess p;
      p.start(QStringLiteral(SEEDVAE_CLI_PATH), QStringList{"queue"} + args);
      return p.waitForFinished(30000) && p.exitStatus() == QProcess::NormalExit &&
             p.exitCode() == 0;
    };
    QVERIFY(cli({"pause", QString::number(id[1])}));
    QTRY_COMPARE_WITH_TIMEOUT(cell(panel, id[1], 1), QString("paused"), 10000);
    QVERIFY(cli({"move", QString::number(id[1]), "0"}));
    QTRY_COMPARE_WITH_TIMEOUT(row_of(panel, id[1]), 0, 10000);
    QVERIFY(cli({"remove", QString::number(id[2])}));
    QTRY_COMPARE_WITH_TIMEOUT(panel->table()->rowCount(), 1, 10000);
  }

  // A failing job, then a good one: the queue goes on after the failure. While it runs the
  // window's Run and Run A/B wait, and the panel shows the running job's progress.
  void runsFailedThenDone() {
    auto w = ready_window("run");
    QueuePanel* panel = w->queuePanel();
    RunController* c = w->controller();
    QueuedJob bad = sample_job(32, 32, 5);
    bad.input = dir_.filePath("missing.mp4").toStdString();
    // three chunks (5 + 4 + 4 frames), whose encode and decode reports alternate
    QueuedJob good = sample_job(32, 32, 13);
    good.weights = to_fs_path(write_tiny_weights(dir_, "tiny.safetensors")).string();
    good.output = dir_.filePath("good.mkv").toStdString();
    const int64_t bad_id = add(panel, bad);
    const int64_t good_id = add(panel, good);
    QVERIFY(bad_id != 0 && good_id != 0);

    QSignalSpy started(c, &RunController::queueJobStarted);
    QSignalSpy progress(c, &RunController::queueProgress);
    QSignalSpy finished(c, &RunController::queueFinished);
    click(panel, "queueRun");
    QVERIFY(c->queueRunning());
    QVERIFY(!w->startRun());
    QVERIFY(!w->startAB());
    QVERIFY(!w->findChild<QAction*>("actionRun")->isEnabled());
    QVERIFY(!w->abPanel()->findChild<QPushButton*>("runAB")->isEnabled());
    QVERIFY(!panel->findChild<QPushButton*>("queueRun")->isEnabled());
    QVERIFY(panel->findChild<QPushButton*>("queueStop")->isEnabled());
    QVERIFY(panel->statusText().contains("Running the queue"));

    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.first().at(0).toLongLong(), qint64{2});
    QVERIFY(finished.first().at(1).toString().isEmpty());
    QVERIFY(!finished.first().at(2).toBool());
    QCOMPARE(started.count(), 2);
    QVERIFY(!c->busy());
    QVERIFY(w->findChild<QAction*>("actionRun")->isEnabled());

    const std::vector<QueuedJob> jobs = file_jobs();
    const QueuedJob* b = find(jobs, bad_id);
    const QueuedJob* g = find(jobs, good_id);
    QVERIFY(b && g);
    QCOMPARE(b->state, QueueState::kFailed);
    QVERIFY(b->message.find("missing.mp4") != std::string::npos);
    QCOMPARE(g->state, QueueState::kDone);
    QCOMPARE(g->frames, int64_t{13});
    QVERIFY(g->ms_per_frame > 0 && g->seconds > 0);
    QVERIFY(g->peak_bytes > 0);
    QVERIFY(std::isfinite(g->psnr_db) && g->psnr_db > 0);
    QVERIFY(QFileInfo::exists(dir_.filePath("good.mkv")));

    // The good job's progress reached the panel while it ran, up to its end, never going back
    // while its encode and decode reports alternated.
    double last = -1;
    QStringList stages;
    for (const auto& args : progress) {
      const ProgressUpdate u = args.first().value<ProgressUpdate>();
      if (u.run_id != static_cast<quint64>(good_id)) {
        QCOMPARE(u.stage, QString("prepare"));  // the failing job read nothing
        continue;
      }
      QVERIFY2(u.fraction >= last, qPrintable(QStringLiteral("%1 %2/%3: %4 after %5")
                                                  .arg(u.stage)
                                                  .arg(u.done)
                                                  .arg(u.total)
                                                  .arg(u.fraction)
                                                  .arg(last)));
      last = u.fraction;
      stages << u.stage;
    }
    QCOMPARE(last, 1.0);
    const qsizetype first_decode = stages.indexOf("decode");
    QVERIFY2(first_decode >= 0 && stages.lastIndexOf("encode") > first_decode,
             qPrintable(stages.join(' ')));

    QCOMPARE(cell(panel, bad_id, 1), QString("failed"));
    QVERIFY(cell(panel, bad_id, 5).contains("missing.mp4"));
    QCOMPARE(cell(panel, good_id, 1), QString("done"));
    QVERIFY2(cell(panel, good_id, 5).contains("13 frames") &&
                 cell(panel, good_id, 5).contains("ms/frame") &&
                 cell(panel, good_id, 5).contains("peak") &&
                 cell(panel, good_id, 5).contains("PSNR"),
             qPrintable(cell(panel, good_id, 5)));
    QVERIFY2(panel->statusText().contains("ran 2 jobs"), qPrintable(panel->statusText()));

    // A failed job queued again runs again (and fails again); meanwhile an interactive run
    // keeps the queue from starting.
    w->infoPanel()->setSample(32, 32, 5);
    QSignalSpy run_done(w.get(), &MainWindow::runFinished);
    QVERIFY(w->startRun());
    QVERIFY(!panel->findChild<QPushButton*>("queueRun")->isEnabled());
    QVERIFY(run_done.wait(60000));
    QTRY_VERIFY_WITH_TIMEOUT(!c->busy(), 10000);
    panel->selectJob(bad_id);
    edit(panel, "queueResume");
    QVERIFY(panel->findChild<QPushButton*>("queueRun")->isEnabled());
  }

  // Stop (the window's Cancel too) stops the running job at its next check; it stays queued.
  void stopKeepsTheJobQueued() {
    auto w = ready_window("stop");
    QueuePanel* panel = w->queuePanel();
    RunController* c = w->controller();
    QueuedJob long_job = sample_job(128, 128, 41);
    long_job.options.chunk_latents = 1;
    const int64_t id = add(panel, long_job);
    QVERIFY(id != 0);
    QSignalSpy progress(c, &RunController::queueProgress);
    QSignalSpy finished(c, &RunController::queueFinished);
    QVERIFY(panel->runQueue());
    QTRY_VERIFY_WITH_TIMEOUT(
        std::any_of(progress.begin(), progress.end(),
                    [](const QList<QVariant>& a) {
                      return a.first().value<ProgressUpdate>().stage.startsWith("encode");
                    }) ||
            !finished.isEmpty(),
        60000);
    QVERIFY2(finished.isEmpty(), "the job ended before it could be stopped");
    // The panel shows the running job with its progress.
    QCOMPARE(cell(panel, id, 1), QString("running"));
    auto* bar = qobject_cast<QProgressBar*>(panel->table()->cellWidget(row_of(panel, id), 4));
    QVERIFY(bar);
    QVERIFY2(bar->text().contains("encode") && bar->text().contains("%"), qPrintable(bar->text()));
    click(panel, "queueStop");
    QVERIFY(!panel->findChild<QPushButton*>("queueStop")->isEnabled());
    QVERIFY(finished.wait(30000));
    QVERIFY(finished.first().at(2).toBool());  // cancelled
    const std::vector<QueuedJob> jobs = file_jobs();
    QCOMPARE(jobs.size(), size_t{1});
    QCOMPARE(jobs.front().state, QueueState::kQueued);
    QVERIFY2(jobs.front().message.find("stopped") != std::string::npos,
             jobs.front().message.c_str());
    QCOMPARE(cell(panel, id, 1), QString("queued"));
    QVERIFY(panel->findChild<QPushButton*>("queueRun")->isEnabled());
  }

  // A decode the CLI queues (`queue add --decode LATENT`) shows in the panel as "decode <latent>"
  // and runs there: done with its frames and no PSNR (nothing to compare with). The frame
  // options do not go with --decode.
  void decodeJobFromTheCli() {
    QDir().mkpath(QFileInfo(queue_file_).absolutePath());  // watched from the start
    auto w = ready_window("decode");
    QueuePanel* panel = w->queuePanel();
    RunController* c = w->controller();
    auto cli = [](const QStringList& args) {
      QProcess p;
      p.start(QStringLiteral(SEEDVAE_CLI_PATH), args);
      p.waitForFinished(60000);
      return std::make_pair(
          p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError()));
    };
    const QString latent = dir_.filePath("queued_latent.safetensors");
    auto [code, text] = cli({"encode", "--sample-clip", "--size", "32x32", "--frames", "5",
                             "--synthetic", "tiny", "-o", latent, "-q"});
    QVERIFY2(code == 0, qPrintable(text));
    const QString out = dir_.filePath("decoded.mkv");
    std::tie(code, text) = cli({"queue", "add", "--decode", latent, "--frames", "5", "-o", out});
    QVERIFY2(code == 2, qPrintable(text));  // a frame option with --decode
    std::tie(code, text) = cli({"queue", "add", "--decode", latent, "-o", out, "--synthetic",
                                "tiny", "--threads", "1", "--json"});
    QVERIFY2(code == 0, qPrintable(text));
    const std::vector<QueuedJob> added = file_jobs();
    QCOMPARE(added.size(), size_t{1});
    const int64_t id = added.front().id;
    QCOMPARE(added.front().kind, JobKind::kDecode);
    QTRY_VERIFY_WITH_TIMEOUT(cell(panel, id, 2).startsWith("decode queued_latent"), 10000);

    QSignalSpy finished(c, &RunController::queueFinished);
    click(panel, "queueRun");
    QVERIFY(finished.wait(60000));
    QVERIFY(finished.first().at(1).toString().isEmpty());
    const std::vector<QueuedJob> jobs = file_jobs();
    QCOMPARE(jobs.size(), size_t{1});
    QVERIFY2(jobs.front().state == QueueState::kDone, jobs.front().message.c_str());
    QCOMPARE(jobs.front().frames, int64_t{5});
    QVERIFY(QFileInfo::exists(out));
    QTRY_COMPARE_WITH_TIMEOUT(cell(panel, id, 1), QString("done"), 10000);
    QVERIFY2(cell(panel, id, 5).contains("5 frames") && !cell(panel, id, 5).contains("PSNR"),
             qPrintable(cell(panel, id, 5)));
  }

  // After an A/B, "Enqueue winner…" queues the picked slot's compared settings over every frame
  // of the compared input.
  void abEnqueuesTheWinner() {
    auto w = ready_window("ab");
    auto* enqueue = w->abPanel()->findChild<QToolButton*>("enqueueWinner");
    QVERIFY(enqueue);
    QVERIFY(!enqueue->isEnabled());  // no comparison yet
    w->infoPanel()->setSample(32, 32, 5);
    RunOptions a = w->settingsPanel()->settings();
    a.chunk_latents = 1;
    RunOptions b = a;
    b.chunk_latents = 0;
    b.lone_head = !a.lone_head;
    w->setSlot("A", a);
    w->setSlot("B", b);
    QSignalSpy ab_done(w.get(), &MainWindow::abFinished);
    QVERIFY(w->startAB());
    QVERIFY(ab_done.wait(120000));
    const AbComparison ab = ab_done.first().first().value<AbComparison>();
    QVERIFY2(ab.ok, qPrintable(ab.error));
    QVERIFY(enqueue->isEnabled());
    // The slots change after the A/B: the job takes what was compared.
    w->setSlot("B", a);

    QAction* pick_b = enqueue->menu()->findChild<QAction*>("enqueueB");
    QVERIFY(pick_b);
    QVERIFY(pick_b->text().contains("PSNR"));
    pick_b->trigger();
    QPointer<QDialog> dialog = w->findChild<QDialog*>("queueAddDialog");
    QVERIFY(dialog && dialog->isVisible());
    QVERIFY(dialog->windowTitle().contains("B"));
    QCOMPARE(dialog->findChild<QSpinBox*>("queueFirst")->value(), 0);
    QCOMPARE(dialog->findChild<QSpinBox*>("queueCount")->value(), 0);  // all frames
    dialog->findChild<QLineEdit*>("queueOutput")->setText(dir_.filePath("winner.mkv"));
    QSignalSpy added(w->queuePanel(), &QueuePanel::editFinished);
    dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
    QTRY_VERIFY_WITH_TIMEOUT(!dialog || !dialog->isVisible(), 5000);
    QVERIFY(added.wait(10000));

    const std::vector<QueuedJob> jobs = file_jobs();
    QCOMPARE(jobs.size(), size_t{1});
    const QueuedJob& j = jobs.front();
    QCOMPARE(QString::fromStdString(to_json(j.options)),
             QString::fromStdString(to_json(ab.b.settings)));
    QCOMPARE(j.options.chunk_latents, 0);
    QCOMPARE(j.options.lone_head, b.lone_head);
    QCOMPARE(j.first_frame, int64_t{0});
    QCOMPARE(j.max_frames, int64_t{-1});
    QCOMPARE(j.stride, 1);
    QVERIFY(j.input.empty());  // the sample clip, as compared
    QCOMPARE(j.sample_width, 32);
    QCOMPARE(j.sample_frames, 5);
    QCOMPARE(QString::fromStdString(j.weights),
             QString::fromStdString(queue_weights(default_weights_spec())));
    QCOMPARE(from_fs_path(j.output), dir_.filePath("winner.mkv"));
    QCOMPARE(w->queuePanel()->table()->rowCount(), 1);
  }

  // A slot on its own weights (here B on the built-in Wan2.1 VAE): its winner is queued with those
  // weights, not the loaded model's, even when the slot has changed since.
  void abEnqueuesTheWinnersWeights() {
    auto w = ready_window("ab-weights");
    w->infoPanel()->setSample(32, 32, 5);
    RunOptions a = w->settingsPanel()->settings();
    a.chunk_latents = 1;
    w->setSlot("A", a);
    w->setSlot("B", a);
    w->setSlotWeights("B", WeightsSpec{QString(), "wan21-tiny"});
    QSignalSpy ab_done(w.get(), &MainWindow::abFinished);
    QVERIFY(w->startAB());
    QVERIFY(ab_done.wait(120000));
    const AbComparison ab = ab_done.first().first().value<AbComparison>();
    QVERIFY2(ab.ok, qPrintable(ab.error));
    QCOMPARE(ab.b.family, QString("Wan2.1"));
    w->setSlotWeights("B", std::nullopt);

    auto* enqueue = w->abPanel()->findChild<QToolButton*>("enqueueWinner");
    QAction* pick_b = enqueue->menu()->findChild<QAction*>("enqueueB");
    QVERIFY(pick_b);
    QVERIFY2(pick_b->text().contains("wan21-tiny"), qPrintable(pick_b->text()));
    pick_b->trigger();
    QPointer<QDialog> dialog = w->findChild<QDialog*>("queueAddDialog");
    QVERIFY(dialog && dialog->isVisible());
    dialog->findChild<QLineEdit*>("queueOutput")->setText(dir_.filePath("wan-winner.mkv"));
    QSignalSpy added(w->queuePanel(), &QueuePanel::editFinished);
    dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok)->click();
    QVERIFY(added.wait(10000));
    const std::vector<QueuedJob> jobs = file_jobs();
    QCOMPARE(jobs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(jobs.front().weights), QString("synthetic:wan21-tiny"));
  }
};

QTEST_MAIN(tst_StudioQueue)
#include "tst_studio_queue.moc"
