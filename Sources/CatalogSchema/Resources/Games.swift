import CatalogModels

extension ResourceSchema {
    /// Arcade games: `/v1/games`, searchable by name and description.
    package static let game = ResourceSchema(
        type: "game", noun: "game", path: "/v1/games", table: "games",
        fields: [
            .text("name", rule: GameInput.nameRule, sortable: true, search: 10),
            .text("description", rule: GameInput.descriptionRule, default: "", search: 1),
            .text("imageName", column: "image_name", rule: GameInput.imageNameRule),
        ],
        searchTable: "games_fts", image: ImageSlot("artwork"))
}
