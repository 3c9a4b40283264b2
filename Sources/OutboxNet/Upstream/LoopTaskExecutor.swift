/// Runs Swift tasks on one event loop's thread. A task started with
/// `Task(executorPreference:)` runs its nonisolated async code there, and so do the default
/// actors it enters; a loop callback that resumes such a task (a response arriving) then hands
/// over within the thread instead of waking a thread of the cooperative pool, and the task's
/// next exchange starts on the spot. The replayer's tasks use it: a lane is a chain of short
/// steps between one response and the next request, and each hop between threads used to cost
/// more than the step.
package final class LoopTaskExecutor: TaskExecutor {
    package let loop: EventLoop

    package init(loop: EventLoop) {
        self.loop = loop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}
