import ArgumentParser
import CatalogService

/// `catalog-server video-commands SOURCE OUTPUT`: the ffmpeg runs the server would make of
/// a video file (after probing it with ffprobe, as a job does), one shell-quoted line
/// each, writing into OUTPUT: to run them by hand (the video benchmark compares), or to see
/// what a job does.
struct VideoCommands: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "video-commands", abstract: "Print the ffmpeg runs the server would make of a video file (it is probed first).")

    @Argument(help: "The video file.") var source: String
    @Argument(help: "The folder its media would be written to.") var output: String

    func run() throws {
        do {
            for command in try CatalogApplication.videoCommands(source: source, output: output) {
                print(command.map(Self.quoted).joined(separator: " "))
            }
        } catch {
            Settings.fail("\(error)")
        }
    }

    /// `word` quoted for a POSIX shell.
    static func quoted(_ word: String) -> String {
        "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
